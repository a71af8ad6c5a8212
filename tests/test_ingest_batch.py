"""One ingest of many paths (ingest/batch.py) for every caller, and the facts of each
input kind kept by its reader: a capture folder loads the same through the command
line and the Python API, a host log pairs by time and unpairs like the others.
Each test failed before the layers change (the API left a capture folder's logs and
ncu report unpaired; a host log never paired by time; `rm --pairing` refused one)."""
import csv
import gzip
import json
import subprocess
import sys

import pytest

import tracedb
from conftest import DATA
from tracedb.store import db
from tracedb.store.sql import rows

CAP = DATA / "capture_h100"
NCU_CAP = DATA / "capture_h100_ncu" / "resnet18_bs64"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *map(str, args)], capture_output=True, text=True)


def _pairings(path):
    con = db.connect(path, read_only=True)
    try:
        return (rows(con, "SELECT run, kind, paired_run FROM runs ORDER BY run"),
                rows(con, "SELECT trace_run, ncu_run, iteration, matched, ncu_kernels FROM match_runs"),
                rows(con, "SELECT power_run, trace_run FROM power_alignment ORDER BY 1"))
    finally:
        con.close()


def test_the_api_ingests_a_capture_folder_as_the_command_line_does(tmp_path):
    """tracedb.connect(db).ingest(folder) pairs the folder's power log, host log and
    ncu report with its trace, as `tracedb ingest folder` does: the same runs, the
    same pairings, and every kernel of the ncu CSV (its data rows, counted here) matched."""
    with gzip.open(NCU_CAP / "resnet18_bs64_ncu_raw.csv.gz", "rt") as f:
        _header, _units, *data = list(csv.reader(f))
    done = cli("ingest", NCU_CAP, "--db", tmp_path / "cli.duckdb")
    assert done.returncode == 0, done.stderr
    results = tracedb.connect(tmp_path / "api.duckdb").ingest(str(NCU_CAP))
    assert [r.kind for r in results] == ["trace", "power", "host", "ncu"]
    runs, matches, aligned = _pairings(tmp_path / "api.duckdb")
    assert (runs, matches, aligned) == _pairings(tmp_path / "cli.duckdb")
    trace = "resnet18_bs64"
    assert {(k, p) for _, k, p in runs} == {("trace", None), ("power", trace), ("host", trace), ("ncu", trace)}
    assert matches[0][0] == trace and matches[0][3] == matches[0][4] == len(data) == 425
    assert aligned == [(f"{trace}_power", trace)]


def _span_ns(trace_path):
    """The trace's absolute time span, from the raw JSON (baseTimeNanoseconds + ts)."""
    with gzip.open(trace_path, "rt") as f:
        t = json.load(f)
    ev = [e for e in t["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    base = t["baseTimeNanoseconds"]
    return base + min(e["ts"] for e in ev) * 1000, base + max(e["ts"] + e.get("dur", 0) for e in ev) * 1000


def _host_span_ns(path):
    with open(path) as f:
        ts = [int(r["timestamp_ns"]) for r in csv.DictReader(f)]
    return min(ts), max(ts)


def test_a_host_log_pairs_with_the_trace_it_ran_beside(tmp_path):
    """With two traces in the database, a host log given alone pairs with the one whose
    absolute time overlaps its samples (read from the raw files here), as a power log
    does; the other trace does not overlap it."""
    path = tmp_path / "t.duckdb"
    bs32, bs64 = CAP / "resnet18_bs32", CAP / "resnet18_bs64"
    for d in (bs32, bs64):
        assert cli("ingest", next(d.glob("*.pt.trace.json.gz")), "--db", path).returncode == 0
    host = bs32 / "resnet18_bs32_host.csv"
    h0, h1 = _host_span_ns(host)
    overlaps = {d.name for d in (bs32, bs64)
                if (s := _span_ns(next(d.glob("*.pt.trace.json.gz"))))[0] <= h1 and h0 <= s[1]}
    assert overlaps == {"resnet18_bs32"}
    done = cli("ingest", host, "--db", path)
    assert done.returncode == 0, done.stderr
    assert "paired resnet18_bs32_host with trace resnet18_bs32 (overlapping absolute time)" in done.stdout
    runs, _, _ = _pairings(path)
    assert ("resnet18_bs32_host", "host", "resnet18_bs32") in runs


def test_rm_pairing_undoes_exactly_the_pairing_named(tmp_path):
    """`tracedb rm --pairing` of a host log unlinks it (it was refused: only ncu and power
    runs were paired); of the ncu report, its matches go and the power alignment stays;
    a trace, which is never paired, is refused in one line."""
    path = tmp_path / "r.duckdb"
    assert cli("ingest", NCU_CAP, "--db", path).returncode == 0
    before_runs, before_matches, before_aligned = _pairings(path)
    done = cli("rm", "--pairing", "resnet18_bs64_host", "--db", path)
    assert done.returncode == 0, done.stderr
    assert "removed the pairing of run resnet18_bs64_host (1 link to its trace)" in done.stdout
    runs, matches, aligned = _pairings(path)
    assert ("resnet18_bs64_host", "host", None) in runs
    assert (matches, aligned) == (before_matches, before_aligned)
    assert [r for r in runs if r[0] != "resnet18_bs64_host"] == [r for r in before_runs if r[0] != "resnet18_bs64_host"]

    done = cli("rm", "--pairing", "resnet18_bs64_ncu_raw", "--db", path)
    assert done.returncode == 0, done.stderr
    runs, matches, aligned = _pairings(path)
    assert matches == [] and aligned == before_aligned
    assert ("resnet18_bs64_ncu_raw", "ncu", None) in runs and ("resnet18_bs64_power", "power", "resnet18_bs64") in runs

    done = cli("rm", "--pairing", "resnet18_bs64", "--db", path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "run 'resnet18_bs64' is a trace run: only ncu, host, power runs are paired" in done.stderr


@pytest.mark.parametrize("kind", ["trace", "ncu", "power", "host", "calibration"])
def test_every_reader_carries_its_kinds_facts(kind):
    """What a kind's run is called, how it pairs and unpairs lives on its reader (no
    table of kinds elsewhere): a pairing reader says how it finds its trace."""
    from tracedb.ingest.registry import reader_of_kind
    r = reader_of_kind(kind)
    assert r.kind == kind and r.noun
    pairs_with_time_or_device = type(r).candidates is not type(r).__mro__[-2].candidates
    assert r.pairs == pairs_with_time_or_device
