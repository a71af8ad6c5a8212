"""Outputs never overwrite an input: `-o` naming the database (through a symbolic
or hard link, a relative path, `..`) would replace it with a report, a chart or a
trace. One check for every command that writes a file next to reading one."""
import os


class OutputClash(ValueError):
    pass


def _same(a, b):
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)        # a hard link to it
    except OSError:                          # one of them does not exist
        return False


def refuse_input(output, db=None, inputs=()):
    """OutputClash (one line) when output resolves to the database file db, its WAL
    (db.wal), or one of the input files; otherwise nothing."""
    if not output or output == "-":
        return
    named = []
    if db:
        named += [(str(db), f"the database {db}"), (f"{db}.wal", f"the write-ahead log of the database {db}")]
    named += [(str(p), f"the input file {p}") for p in inputs]
    for path, what in named:
        if _same(output, path):
            via = "" if os.path.abspath(output) == os.path.abspath(path) else " (through a link or another path)"
            raise OutputClash(f"-o {output}: is {what}{via}; writing there would destroy it: give another file")
