"""`export --lake` is idempotent and atomic per run (issue 55): exported twice, or
again after a killed export, every dataset holds each run's rows once (counted in
the Parquet files against the database's tables); a kill -9 while writing leaves
the lake's files as they were, and the next export clears what it left."""
import hashlib
import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest

from conftest import DATA
from tracedb.store import db
from tracedb.query import lake
from tracedb.cli import main

SYNC, ASYNC = "cpu_sync_lenet_bs64", "cpu_async_lenet_bs64"


@pytest.fixture(scope="module")
def dbf(tmp_path_factory):
    path = tmp_path_factory.mktemp("lk") / "x.duckdb"
    assert main(["ingest", str(DATA / "tf" / f"{SYNC}.json.gz"), str(DATA / "tf" / f"{ASYNC}.json.gz"),
                 "--db", str(path)]) == 0
    return path


def lake_counts(lk):
    """(dataset, run) -> rows in the lake's Parquet files."""
    out = {}
    for ds in sorted(p for p in lk.iterdir() if p.is_dir() and not p.name.startswith("_")):
        files = list(ds.rglob("*.parquet"))
        if not any("run=" in str(f) for f in files):
            continue
        for run, n in duckdb.sql(f"SELECT run, count(*) FROM read_parquet('{ds}/**/*.parquet', "
                                 "hive_partitioning = true) GROUP BY run").fetchall():
            out[(ds.name, run)] = n
    return out


def db_counts(path, datasets):
    con = db.connect(path, read_only=True)
    try:
        ds = lake.datasets_of(con)
        return {(name, run): n for name in datasets for run, n in con.execute(
            f"SELECT {ds.run_column[name]}, count(*) FROM {name} GROUP BY 1").fetchall()}
    finally:
        con.close()


def files(lk):
    return {str(p.relative_to(lk)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in lk.rglob("*") if p.is_file() and not p.relative_to(lk).parts[0].startswith("_staging-")}


def test_exporting_twice_holds_every_row_once(dbf, tmp_path):
    lk = tmp_path / "lake"
    for _ in range(2):
        assert main(["export", "--db", str(dbf), "--lake", str(lk)]) == 0
    got = lake_counts(lk)
    want = db_counts(dbf, {d for d, _ in got})
    assert got == want and ("events", SYNC) in got and ("runs", ASYNC) in got
    assert main(["export", "--db", str(dbf), "--lake", str(lk), "--run", SYNC]) == 0     # one run again
    assert lake_counts(lk) == want
    assert not [p for p in lk.iterdir() if p.name.startswith("_staging-")]


def test_a_killed_export_leaves_the_lake_as_it_was(dbf, tmp_path, monkeypatch):
    lk = tmp_path / "lake"
    assert main(["export", "--db", str(dbf), "--lake", str(lk), "--run", SYNC]) == 0
    before, counts = files(lk), lake_counts(lk)
    # interrupted in Python (Ctrl-C) half way through the datasets
    calls, real = [], lake._copy

    def copy(*a):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real(*a)
    monkeypatch.setattr(lake, "_copy", copy)
    assert main(["export", "--db", str(dbf), "--lake", str(lk)]) == 130
    monkeypatch.undo()
    assert files(lk) == before and not [p for p in lk.iterdir() if p.name.startswith("_staging-")]
    # kill -9 of a real export process while it writes
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, "-m", "tracedb.cli", "export", "--db", str(dbf), "--lake", str(lk)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not any(any(s.iterdir()) for s in lk.glob("_staging-*")):
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.wait()
    left = list(lk.glob("_staging-*"))
    assert left, "the export ended before it was killed"
    assert files(lk) == before and lake_counts(lk) == counts
    assert main(["export", "--db", str(dbf), "--lake", str(lk)]) == 0      # the next one clears it
    assert not any(s.exists() for s in left)
    assert lake_counts(lk) == db_counts(dbf, {d for d, _ in lake_counts(lk)})
