"""Paths from files and names from users stay where they belong (issue 55): a
capture manifest naming `../` or an absolute path, or a link out of its folder,
is refused; run and job names the lake cannot hold as a path are refused at ingest
(one that fits exports); tracedb.capture(run='../../x') writes nothing;
`capture -o FILE` is one line."""
import json
import os
import shutil

import pytest

from conftest import DATA
from tracedb.store import db
from tracedb.capture.session import CaptureError, capture
from tracedb.cli import main

CAP = DATA / "capture_h100" / "resnet18_bs32"
TF = DATA / "tf" / "cpu_sync_lenet_bs64.json.gz"


def one_error_line(capsys, *words):
    err = capsys.readouterr().err
    assert err.count("tracedb: error:") == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err
    return err


def runs_of(path):
    if not os.path.exists(path):
        return []
    con = db.connect(path, read_only=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT run FROM runs").fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("how", ["dotdot", "absolute", "link"])
def test_a_manifest_cannot_name_a_file_outside_its_folder(tmp_path, capsys, how):
    folder = tmp_path / "cap" / "resnet18_bs32"
    shutil.copytree(CAP, folder)
    outside = tmp_path / "outside.json.gz"
    shutil.copy(TF, outside)
    m = json.loads((folder / "capture.json").read_text())
    if how == "link":
        os.remove(folder / m["files"]["trace"])
        os.symlink(outside, folder / m["files"]["trace"])
    else:
        m["files"]["trace"] = "../../outside.json.gz" if how == "dotdot" else str(outside)
    (folder / "capture.json").write_text(json.dumps(m))
    dbf = tmp_path / "x.duckdb"
    assert main(["ingest", str(folder), "--db", str(dbf)]) == 1
    one_error_line(capsys, str(folder), "capture.json names a file",
                   "link out of the folder" if how == "link" else "not a file name inside the folder")
    assert runs_of(dbf) == []


def test_the_same_folder_with_its_own_manifest_loads(tmp_path):
    folder = tmp_path / "resnet18_bs32"
    shutil.copytree(CAP, folder)
    dbf = tmp_path / "x.duckdb"
    assert main(["ingest", str(folder), "--db", str(dbf)]) == 0
    assert runs_of(dbf) == ["resnet18_bs32", "resnet18_bs32_host", "resnet18_bs32_power"]


def test_capture_run_name_cannot_leave_its_folder(tmp_path):
    out = tmp_path / "c"
    for bad in ("../../x", "/abs", ".hidden", "a\\b"):
        with pytest.raises(CaptureError, match="run"):
            capture(str(out), run=bad)
    assert os.listdir(tmp_path) == []          # nothing written, inside or outside


def test_capture_into_an_existing_file_is_one_line(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("keep me")
    assert main(["capture", "-o", str(f), "--", "true"]) == 1
    one_error_line(capsys, str(f), "is a file, not a capture folder")
    assert f.read_text() == "keep me"


CJK = "训练日志批次"      # 6 characters, 18 bytes of UTF-8, 54 percent-encoded


def test_run_names_the_lake_cannot_hold_are_refused_at_ingest(tmp_path, capsys):
    dbf = tmp_path / "x.duckdb"
    long_cjk = (CJK * 8)[:44]
    f = tmp_path / f"{long_cjk}.json.gz"
    shutil.copy(TF, f)
    assert main(["ingest", str(f), "--db", str(dbf)]) == 1           # the default name, from the file
    one_error_line(capsys, "too long for a path", "give --run NAME")
    assert main(["ingest", str(TF), "--run", long_cjk, "--db", str(dbf)]) == 1
    one_error_line(capsys, "too long for a path")
    job = tmp_path / ("j" * 200)                                     # a job's folder: JOB.rank0 over 200
    shutil.copytree(DATA / "dist" / "ddp", job)
    assert main(["ingest", str(job), "--db", str(dbf)]) == 1
    err = capsys.readouterr().err
    assert err.count("tracedb: error:") == 2 and "at most 200 characters" in err and "--job NAME" in err
    for bad in ("../x", "a/b", ".j"):
        assert main(["ingest", str(DATA / "dist" / "ddp"), "--job", bad, "--db", str(dbf)]) == 1
        one_error_line(capsys, "--job")
    assert runs_of(dbf) == []


def test_a_name_that_fits_loads_and_exports(tmp_path):
    """26 CJK characters: 234 bytes encoded, under 255: loaded, and in the lake."""
    name = (CJK * 5)[:26]
    f = tmp_path / f"{name}.json.gz"
    shutil.copy(TF, f)
    dbf = tmp_path / "x.duckdb"
    assert main(["ingest", str(f), "--db", str(dbf)]) == 0
    assert runs_of(dbf) == [name]
    assert main(["export", "--db", str(dbf), "--lake", str(tmp_path / "lake")]) == 0
    assert [r["run"] for r in json.loads((tmp_path / "lake" / "manifest.json").read_text())["runs"]] == [name]


def test_export_of_a_run_the_lake_cannot_hold_is_one_line_and_writes_nothing(tmp_path, capsys):
    """A database from elsewhere holding such a name: refused before anything is written."""
    import duckdb
    dbf = tmp_path / "x.duckdb"
    assert main(["ingest", str(TF), "--db", str(dbf)]) == 0
    con = duckdb.connect(str(dbf))
    con.execute("UPDATE runs SET run = ? WHERE run = 'cpu_sync_lenet_bs64'", [CJK * 8])
    con.close()
    capsys.readouterr()
    assert main(["export", "--db", str(dbf), "--lake", str(tmp_path / "lake")]) == 1
    one_error_line(capsys, "too long for a path", "nothing was written")
    assert not (tmp_path / "lake").exists()
