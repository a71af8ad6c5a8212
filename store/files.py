"""A database on disk is its file and the WAL beside it."""
import os


def remove(path):
    """Remove a database file and the WAL beside it, where they are."""
    for f in (path, path + ".wal"):
        if os.path.exists(f):
            os.remove(f)
