"""Bounded resources (issue 55): a gzip that inflates like a bomb (a real trace with
blanks between two events) is refused past the cap with one line and little
written to the temp folder, while the same trace without the blanks loads; an ncu
CSV of absurd width is refused at once (a real export with the BOM Excel writes is
read); a FIFO is refused without blocking, as an input and as --db."""
import gzip
import os
import shutil
import threading
import time
import zlib

import pytest

from conftest import AMP_NCU, DATA, read_ncu_csv, write_ncu_csv
from tracedb.store import db
from tracedb.cli import main
from tracedb.ingest import source

TF = DATA / "tf" / "cpu_sync_lenet_bs64.json.gz"


def bomb(path, blanks):
    """TF's trace with `blanks` spaces after its first event (valid JSON, gzip level 9)."""
    text = gzip.open(TF, "rb").read()
    cut = text.index(b"},", text.index(b'"traceEvents"')) + 2
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(c.compress(text[:cut]))
        chunk = b" " * (1 << 20)
        for _ in range(blanks >> 20):
            f.write(c.compress(chunk))
        f.write(c.compress(text[cut:]) + c.flush())
    return path


def one_error(capsys, *words):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracedb: error: ") and all(w in err for w in words), err


def test_a_gzip_bomb_is_refused_past_the_cap(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(source, "INFLATE_MIN", 16 << 20)       # the cap's floor lowered: a 300 MB bomb, not 6 GB
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    f = bomb(tmp_path / "bomb.json.gz", 300 << 20)
    assert f.stat().st_size < 1 << 20
    peak = []
    stop = threading.Event()

    def watch():                    # the temp folder's size while the ingest runs
        while not stop.is_set():
            peak.append(sum(p.stat().st_size for p in (tmp_path / "tmp").rglob("*") if p.is_file()))
            time.sleep(0.01)
    t = threading.Thread(target=watch)
    t.start()
    try:
        rc = main(["ingest", str(f), "--db", str(tmp_path / "x.duckdb")])
    finally:
        stop.set()
        t.join()
    assert rc == 1
    one_error(capsys, str(f), "inflates more than 250x", "TRACEDB_MAX_INFLATION")
    assert max(peak) < 300 << 20 and not (tmp_path / "x.duckdb").exists()
    ok = bomb(tmp_path / "fine.json.gz", 0)          # the same trace, no blanks: loaded
    assert main(["ingest", str(ok), "--db", str(tmp_path / "y.duckdb")]) == 0


def test_an_absurdly_wide_ncu_csv_is_refused_at_once(tmp_path, capsys):
    header, units, data = read_ncu_csv(AMP_NCU)
    extra = [f"m{i}" for i in range(100_000)]
    f = write_ncu_csv(tmp_path / "wide.csv.gz", header + extra, units + [""] * len(extra),
                      [r + ["1"] * len(extra) for r in data[:3]])
    t0 = time.monotonic()
    assert main(["ingest", str(f), "--db", str(tmp_path / "x.duckdb")]) == 1
    assert time.monotonic() - t0 < 10
    one_error(capsys, str(f), "100361 columns", "more than 20000")


def test_an_ncu_csv_with_a_byte_order_mark_is_read(tmp_path):
    plain = gzip.open(AMP_NCU, "rb").read()
    f = tmp_path / "bom.csv"
    f.write_bytes(b"\xef\xbb\xbf" + plain[plain.index(b'"ID",'):])     # the mark right before the header
    con = db.connect(tmp_path / "a.duckdb")
    from tracedb.ingest import ingest_file
    r = ingest_file(con, f)
    header, _, data = read_ncu_csv(AMP_NCU)
    ids = {row[header.index("ID")] for row in data if row[header.index("ID")].isdigit()}
    assert r.kind == "ncu" and db.scalar(con, "SELECT count(*) FROM kernels WHERE run = ?", [r.run]) == len(ids)
    plain_run = ingest_file(con, AMP_NCU).run         # the same export without the mark: the same values
    same = "SELECT metric, sum(value) FROM counters WHERE run = ? GROUP BY 1 ORDER BY 1"
    assert db.rows(con, same, [r.run]) == db.rows(con, same, [plain_run])
    con.close()


def test_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    dbf = tmp_path / "x.duckdb"
    result = []
    t = threading.Thread(target=lambda: result.append(main(["ingest", str(fifo), "--db", str(dbf)])), daemon=True)
    t.start()
    t.join(20)
    assert result == [1], "ingest of a FIFO with no writer blocked"
    one_error(capsys, str(fifo), "is a pipe")
    job = tmp_path / "job"                                  # in a job's folder: left out, the rank loads
    job.mkdir()
    shutil.copy(DATA / "dist" / "ddp" / "rank0.json.gz", job)
    os.mkfifo(job / "rank1.json")
    t = threading.Thread(target=lambda: result.append(main(["ingest", str(job), "--db", str(dbf)])), daemon=True)
    t.start()
    t.join(30)
    assert result == [1, 0]
    fdb = tmp_path / "f.duckdb"
    os.mkfifo(fdb)
    t = threading.Thread(target=lambda: result.append(main(["query", "overview", "--db", str(fdb)])), daemon=True)
    t.start()
    t.join(20)
    assert result == [1, 0, 1]
