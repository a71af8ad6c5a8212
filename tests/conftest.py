import atexit
import functools
import gzip
import json
import os
import re
import shutil
import tempfile
from decimal import Decimal
from pathlib import Path

import pytest

from tracedb.store import db
from tracedb.ingest import ingest_file

DATA = Path(__file__).parent / "data"

# New databases are copies of a template (store/template.py): the tests keep theirs in a
# folder of this test process, apart from the user's cache (the CLIs they run inherit it).
os.environ["TRACEDB_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracedb-test-cache-")
atexit.register(shutil.rmtree, os.environ["TRACEDB_CACHE_DIR"], True)
TORCH = sorted((DATA / "torch").glob("*.json.gz"))
TF = sorted((DATA / "tf").glob("*.json.gz"))
TRACES = TORCH + TF


def run_name(path):
    return os.path.basename(path).replace(".json.gz", "")


def raw_trace(path):
    """Independent parse of a fixture: the whole document, floats as Decimal."""
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


@pytest.fixture(scope="session")
def fixture_db(tmp_path_factory):
    """A real DuckDB file with every fixture trace ingested."""
    path = tmp_path_factory.mktemp("db") / "fixtures.duckdb"
    con = db.connect(path)
    for p in TRACES:
        ingest_file(con, p)
    yield con
    con.close()


@pytest.fixture
def fresh_db(tmp_path):
    con = db.connect(tmp_path / "t.duckdb")
    yield con
    con.close()


def built_once(tmp_path_factory, name, build):
    """A copy (the caller's to write to) of a database built once for the whole run:
    build(path) runs in whichever process asks first, under a lock in the run's temp
    folder, which the xdist workers share; the others wait for it and copy it."""
    import fcntl
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent                  # the run's folder, above each worker's own
    shared = root / f"built-{name}.duckdb"
    with open(root / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.exists():
            part = root / f"building-{name}-{os.getpid()}.duckdb"
            build(part)
            os.replace(part, shared)
    mine = tmp_path_factory.mktemp(name) / f"{name}.duckdb"
    shutil.copyfile(shared, mine)
    return mine


def dist_jobs_db(tmp_path_factory):
    """A copy of every job directory of tests/data/dist loaded with `tracedb ingest DIR`
    into one database (built once for the run: test_distributed.py, test_jobs.py)."""
    from tracedb.cli import main
    jobs = sorted(p for p in (DATA / "dist").iterdir() if p.is_dir() and any(p.glob("rank*.json.gz")))
    return built_once(tmp_path_factory, "dist_jobs",
                      lambda path: main(["ingest", *map(str, jobs), "--db", str(path)]) == 0 or pytest.fail("ingest"))


NCU = DATA / "ncu"
AMP_TRACE = DATA / "torch" / "h100_resnet50_bs64_amp.json.gz"
AMP_NCU = NCU / "h100_resnet50_bs64_amp_raw.csv.gz"
AMP_NCU_BASE = NCU / "h100_resnet50_bs64_amp_raw_baseunits.csv.gz"


def read_ncu_csv(path):
    """Independent parse of an ncu CSV export: (header, units row, data rows) as text."""
    import csv
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1], rows[2:]


def write_ncu_csv(path, header, units, data, preamble=()):
    """Write rows the way ncu does (every value quoted), gzip-compressed."""
    import csv
    with gzip.open(path, "wt", newline="") as f:
        for line in preamble:
            f.write(line + "\n")
        w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(header)
        if units is not None:
            w.writerow(units)
        w.writerows(data)
    return path


# the traces of op_totals_db: PyTorch with several iterations, record_shapes traces,
# one without step markers and with its own CUPTI counters, TensorFlow, JAX through
# XProf, and an Nsight Systems export
OP_TOTALS_TRACES = {
    "amp": DATA / "torch" / "h100_resnet50_bs64_amp.json.gz",
    "gpt2": DATA / "flops" / "h100_gpt2_bs8_amp.json.gz",
    "mobilenet": DATA / "flops" / "h100_mobilenet_v2_ops.json.gz",
    "cupti": DATA / "cupti" / "a100_cupti_range_profiler.json.gz",       # no step markers
    "tf": DATA / "tf" / "cpu_async_resnet50_bs4.json.gz",
    "jax": DATA / "jax" / "h200_jax_mlp.trace.json.gz",
    "nsys": DATA / "nsys" / "mfu_2gpu_before.sqlite.gz",
}


@pytest.fixture(scope="session")
def op_totals_db(tmp_path_factory):
    """OP_TOTALS_TRACES ingested with --op-totals (the nsys export without: a run the
    reports sweep), GPT-2 paired with its ncu counters, and the ranks of a DDP job (a
    folder ingest); tests that change it work on a copy."""
    from tracedb.cli import main
    p = tmp_path_factory.mktemp("itagg") / "a.duckdb"
    con = db.connect(p)
    for run, f in OP_TOTALS_TRACES.items():
        ingest_file(con, f, run=run, options={"iterations_from": "FlashAttnFunc"} if run == "nsys" else
                    {"op_totals": True})
    ingest_file(con, DATA / "flops" / "h100_gpt2_bs8_amp_ncu_raw_baseunits.csv.gz", pair_with="gpt2")
    con.close()
    assert main(["ingest", str(DATA / "dist" / "ddp"), "--db", str(p), "--op-totals"]) == 0
    return p


@pytest.fixture(scope="session")
def matched_db(tmp_path_factory):
    """The amp trace and its ncu report (auto units), ingested and matched."""
    path = tmp_path_factory.mktemp("match") / "matched.duckdb"
    con = db.connect(path)
    ingest_file(con, AMP_TRACE)
    ingest_file(con, AMP_NCU, pair_with="h100_resnet50_bs64_amp")
    yield con
    con.close()


# --- Spark: one session for the whole run, cheap to start ----------------------------------
# engines.spark_session() makes one session per process; every test that runs a report on
# Spark asks for the `spark` fixture, so that (under pytest-xdist) all of them run on one
# worker (pytest_xdist_make_scheduler below) and the JVM starts once. The JVM compiles
# with C1 only and collects with one thread (these tests run small queries: the C2 compiler
# and parallel GC cost more CPU than they save), shuffles into 2 partitions, not 200, and
# plans each query once (no adaptive re-planning: on these lakes of kilobytes it costs more
# than it saves; the rows do not depend on it). Ten report runs on the 2-rank lake,
# JVM included, measured at one load: 100 CPU-s with AQE, 75 without; 167 before it all.
# With C1 alone the JVM reserves 48 MB of code cache (240 MB with C2), and the run's
# hundreds of generated query classes once filled it ("Out of space in CodeCache": the
# JVM shut down mid-run, every Spark test after it failed): 512 MB reserved (committed
# as used). Expressions outside the whole-stage code (projections, orderings, predicates)
# are evaluated by Spark's interpreter, not compiled to a class each (Janino compiling
# hundreds of small classes was most of the CPU on these few rows); the rows of five
# reports were byte for byte the same: 5 report runs on the ddp_2pg lake, JVM included,
# 76-101 CPU-s compiled, 66-74 interpreted.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=512m "
                                           "-Dspark.sql.shuffle.partitions=2 -Dspark.sql.adaptive.enabled=false "
                                           "-Dspark.sql.codegen.factoryMode=NO_CODEGEN")


@pytest.fixture(scope="session")
def spark():
    """The process's Spark session (engines.spark_session), started once for the run."""
    pytest.importorskip("pyspark", reason="pyspark not installed (pip install 'tracedb[spark]')")
    from tracedb.query import engines
    session = engines.spark_session()
    session.conf.set("spark.sql.shuffle.partitions", "2")
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    return session


_SPARK_USE = re.compile(r"^def \w+\((?:[^)]*\W)?spark\b", re.M)    # a test or fixture asking for `spark`


@functools.cache
def _runs_spark(path):
    try:
        return bool(_SPARK_USE.search(Path(path).read_text()))
    except OSError:
        return False


@pytest.hookimpl(optionalhook=True)     # a hook of pytest-xdist: unknown without it (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """`-n N --dist loadfile` (the README's command): each test file on one worker, except
    that every file asking for the `spark` fixture goes into one unit, "spark", handed out
    first: the JVM starts once, and the longest unit does not start last while the other
    worker idles. (xdist's own `--dist loadgroup` does not group under pytest 9: it renames
    a node id attribute pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SparkFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return "spark" if _runs_spark(Path(config.rootpath) / path) else path

        _spark_first = False

        def _assign_work_unit(self, node):
            if not self._spark_first:           # the first unit handed out
                self._spark_first = True
                if "spark" in self.workqueue:
                    self.workqueue.move_to_end("spark", last=False)
            super()._assign_work_unit(node)

    return SparkFilesTogether(config, log)
