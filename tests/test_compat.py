"""A tracedb database opens in the DuckDB people have: the 1.x CLI and drivers.

The test installs an older duckdb into a folder of its own (under the test's tmp
dir), put in front of this Python's packages, and reads a real tracedb database
with it; skipped, with the reason, when pip cannot reach the package index.
"""
import json
import os
import subprocess
import sys

import pytest

from tracedb.store import db
from tracedb.ingest import ingest_file

from conftest import AMP_NCU, AMP_TRACE

# the newest 1.x on the package index when this was written, and the 1.4 LTS line
OLD_DUCKDB = ("1.5.6", "1.4.4")


@pytest.fixture(scope="module", params=OLD_DUCKDB)
def old_python(request, tmp_path_factory):
    """(command, version): this Python with only the old duckdb in front of its own (pip
    --target into a folder of its own, first on PYTHONPATH: no venv and pip of its own)."""
    version = request.param
    target = tmp_path_factory.mktemp("old-duckdb") / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", "--target", str(target), f"duckdb=={version}"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"pip cannot install duckdb=={version} (no package index?): "
                    f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = lambda args: subprocess.run([sys.executable, "-s", *args], capture_output=True, text=True, env=env)
    return run, version


def test_database_opens_in_duckdb_1x(old_python, tmp_path):
    path = tmp_path / "compat.duckdb"
    con = db.connect(path)
    ingest_file(con, AMP_TRACE)
    ingest_file(con, AMP_NCU, pair_with="h100_resnet50_bs64_amp")
    expected = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "events", "kernels", "iterations", "counters", "matches", "layer_rules")}
    con.close()
    script = (
        "import duckdb, json, sys\n"
        "c = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(json.dumps({'version': duckdb.__version__, 'counts': {t: c.execute(f'SELECT count(*) FROM {t}')"
        ".fetchone()[0] for t in sys.argv[2:]}}))\n")
    run, version = old_python
    r = run(["-c", script, str(path), *expected])
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["version"] == version
    assert got["counts"] == expected
    assert expected["kernels"] > 0 and expected["matches"] > 0


def test_new_database_declares_the_compatible_storage(tmp_path):
    """The file is written in the storage format of db.STORAGE_COMPATIBILITY, not 2.0's."""
    path = tmp_path / "v.duckdb"
    db.connect(path).close()
    import duckdb
    con = duckdb.connect(str(path), read_only=True)
    version = con.execute("SELECT tags['storage_version'] FROM duckdb_databases() "
                          "WHERE database_name = 'v'").fetchone()[0]
    con.close()
    assert version == db.STORAGE_COMPATIBILITY + "+"      # duckdb 2.0's own default is v2.0.0+
