#!/usr/bin/env python3
"""Make a large Nsight Systems SQLite export from a real one, for ingest benchmarks
(what ../shared/tools/scale_trace.py does for a Kineto trace).

Replicates the rows of the export's kernel, runtime/driver, memcpy, memset and NVTX
tables, each copy shifted past the previous one in time (the span of the runtime
calls, plus 1 µs) and in correlation ids (their range), until the file is about MB
megabytes: the rows are real rows and every launch still finds its kernel, only
their number grows. The source's own indexes are dropped (nsys writes none; some
repositories add theirs).

usage: scale_nsys.py SOURCE.sqlite[.gz] MB OUT.sqlite
"""
import gzip
import os
import sqlite3
import sys

GROWN = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
         "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")


def make(out, source, mb):
    """out: source's export with its GROWN tables replicated until out is about mb MB;
    the number of copies (the source's own rows counted)."""
    data = gzip.decompress(open(source, "rb").read()) if source.endswith(".gz") else open(source, "rb").read()
    with open(out, "wb") as f:
        f.write(data)
    c = sqlite3.connect(out)
    for (index,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall():
        c.execute(f'DROP INDEX "{index}"')
    span = c.execute("SELECT max(\"end\") - min(start) + 1000 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    corr = c.execute("SELECT max(correlationId) - min(correlationId) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    tables = [t for t in GROWN if c.execute("SELECT 1 FROM sqlite_master WHERE name = ?", [t]).fetchone()]
    for t in tables:
        c.execute(f"CREATE TEMP TABLE orig_{t} AS SELECT * FROM {t}")
    copy = 0
    while os.path.getsize(out) < mb * 1e6:
        copy += 1
        for t in tables:
            cols = [r[1] for r in c.execute(f"PRAGMA table_info({t})")]
            sel = ", ".join(f'"{x}" + {copy * span}' if x in ("start", "end")
                            else f'"{x}" + {copy * corr}' if x == "correlationId" else f'"{x}"' for x in cols)
            c.execute(f"INSERT INTO {t} SELECT {sel} FROM orig_{t}")
        c.commit()
    c.close()
    return copy + 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    n = make(sys.argv[3], sys.argv[1], float(sys.argv[2]))
    print(f"{sys.argv[3]}: {os.path.getsize(sys.argv[3]) / 1e6:.0f} MB, {n} copies of {os.path.basename(sys.argv[1])}")
