"""-o never replaces the database (issue 55): every command that writes a file
refuses a -o that is the database, a link to it (symbolic or hard, or through
`..`) or its WAL, in one line; the file stays byte for byte as it was. The same
commands with another -o write it (the refusal is not of everything)."""
import hashlib
import os
import shutil

import pytest

from conftest import DATA
from tracedb.cli import main

SYNC, ASYNC = "cpu_sync_lenet_bs64", "cpu_async_lenet_bs64"
COMMANDS = {
    "query": ["query", "utilization_levels"],
    "report": ["report", "--run", SYNC],
    "sql": ["sql", "SELECT run FROM runs"],
    "advise": ["advise", "--format", "csv"],
    "diff": ["diff", SYNC, ASYNC],
    "perfetto": ["export", "--perfetto", "--run", SYNC],
    "chart": ["chart", "queue_split"],
    "settings": ["settings", "layer_rules"],
}
SUFFIX = {"report": ".html", "perfetto": ".json", "chart": ".html"}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("clash")
    path = d / "x.duckdb"
    assert main(["ingest", str(DATA / "tf" / f"{SYNC}.json.gz"), str(DATA / "tf" / f"{ASYNC}.json.gz"),
                 "--db", str(path)]) == 0
    return path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def aliases(dbf, suffix):
    """Other names of the database file (and of its WAL) that -o may be given."""
    d = dbf.parent
    out = {"itself": str(dbf), "dotdot": str(d / ".." / d.name / dbf.name)}
    for name in ("sym", "hard"):
        link = d / f"{name}{suffix}"
        if not link.exists():
            (os.symlink if name == "sym" else os.link)(dbf, link)
        out[name] = str(link)
    wal = d / f"x.duckdb.wal{suffix}"          # a link named like an output file, to the WAL
    (d / "x.duckdb.wal").write_bytes(b"")       # (a closed database has no WAL: stand one in)
    if not wal.exists():
        os.symlink(d / "x.duckdb.wal", wal)
    out["wal"] = str(wal)
    out["wal_itself"] = str(d / "x.duckdb.wal")
    return out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_output_onto_the_database_is_refused_in_one_line(two_runs, tmp_path, capsys, command):
    before = digest(two_runs)
    suffix = SUFFIX.get(command, ".csv")
    for kind, out in aliases(two_runs, suffix).items():
        if kind in ("itself", "dotdot") and command in SUFFIX:
            out = str(two_runs)             # the name's own suffix: the check comes before the suffix's
        capsys.readouterr()
        rc = main([*COMMANDS[command], "--db", str(two_runs), "-o", out])
        err = capsys.readouterr().err
        assert rc == 1, (kind, err)
        assert err.count("\n") == 1 and err.startswith(f"tracedb: error: -o {out}: is the ") \
            and "writing there would destroy it" in err, (kind, err)
        assert digest(two_runs) == before and (two_runs.parent / "x.duckdb.wal").read_bytes() == b""
    os.remove(two_runs.parent / "x.duckdb.wal")
    ok = tmp_path / f"out{suffix}"              # another file: written
    assert main([*COMMANDS[command], "--db", str(two_runs), "-o", str(ok)]) in (0, 1 if command == "diff" else 0)
    assert ok.stat().st_size > 0 and digest(two_runs) == before
