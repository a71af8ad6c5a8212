"""Finding rules: one SQL file each (header format in tracedb/advise.py)."""
