import gzip
import json
import os
from decimal import Decimal
from pathlib import Path

import pytest

from tracedb import db
from tracedb.ingest import ingest_file

DATA = Path(__file__).parent / "data"
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
