"""What was silently wrong (issue 55): two files of one job folder claiming rank 0
(loaded in parallel) -> the second is refused; kernel launches linked only by ac2g
flow events are linked (each kernel to the launch the raw file's correlation ids
name, computed here from the JSON), and a trace with neither is warned about."""
import gzip
import json
import shutil

import pytest

from conftest import DATA
from tracedb.cli import main
from tracedb.ingest import ingest_file

AMP = DATA / "torch" / "h100_resnet50_bs64_amp.json.gz"


def test_two_files_claiming_rank_0_in_one_folder(tmp_path, capsys):
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(DATA / "dist" / "ddp" / "rank0.json.gz", job / "a.json.gz")
    doc = json.load(gzip.open(DATA / "dist" / "ddp" / "rank0.json.gz", "rt"))
    doc["traceName"] = "another copy"                 # other content, the same rank
    with gzip.open(job / "b.json.gz", "wt") as f:
        json.dump(doc, f)
    dbf = tmp_path / "x.duckdb"
    for jobs in ("2", "1"):                           # files at once, and one by one
        assert main(["ingest", str(job), "--db", str(dbf), "--jobs", jobs]) == 1
        err = capsys.readouterr().err
        # one error naming both files (their times overlap: one job, not two jobs told apart);
        # nothing of the folder is kept, so the database this command made is gone too
        assert err.count("tracedb: error:") == 1 and "two traces claim rank 0 of one job: a.json.gz and b.json.gz" \
            in err, err
        assert not dbf.exists()


def expected_launches(doc):
    """kernel event position -> its launch call's position, from args.correlation."""
    ev = doc["traceEvents"]
    launch = {}
    for i, e in sorted(enumerate(ev), key=lambda p: (p[1].get("ts", 0), p[0])):
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch.setdefault(e["args"]["correlation"], i)
    return {i: launch.get(e["args"]["correlation"]) for i, e in enumerate(ev)
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}


def stripped(doc, flows):
    doc = json.loads(json.dumps(doc))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if flows or e.get("cat") != "ac2g"]
    for e in doc["traceEvents"]:
        if isinstance(e.get("args"), dict):
            e["args"].pop("correlation", None)
    return doc


def test_launches_linked_by_ac2g_flows_alone(fresh_db, tmp_path):
    doc = json.load(gzip.open(AMP, "rt"))
    want = expected_launches(doc)
    assert len(want) == 905 and all(v is not None for v in want.values())
    f = tmp_path / "flows_only.json"
    f.write_text(json.dumps(stripped(doc, flows=True)))
    run = ingest_file(fresh_db, f).run
    got = dict(fresh_db.execute("SELECT kernel_id, launch_event_id FROM kernels WHERE run = ?", [run]).fetchall())
    assert got == want
    with_corr = ingest_file(fresh_db, AMP).run            # the same ops and layers as with correlation ids
    same = ("SELECT k.kernel_id, k.op_name, l.layer_type FROM trace_kernels k JOIN kernel_layers l "
            "ON l.run = k.run AND l.kernel_id = k.kernel_id WHERE k.run = ? ORDER BY 1")
    assert fresh_db.execute(same, [run]).fetchall() == fresh_db.execute(same, [with_corr]).fetchall()
    assert not fresh_db.execute("SELECT * FROM ingest_log WHERE run = ? AND level = 'warning'", [run]).fetchall()


def test_no_correlation_and_no_flows_is_warned(fresh_db, tmp_path):
    f = tmp_path / "bare.json"
    f.write_text(json.dumps(stripped(json.load(gzip.open(AMP, "rt")), flows=False)))
    with pytest.warns(UserWarning, match="905 of 905 GPU events without args.correlation have no ac2g flow"):
        run = ingest_file(fresh_db, f).run
    assert fresh_db.execute("SELECT count(*) FROM ingest_log WHERE run = ? AND level = 'warning' AND "
                            "message LIKE '%no ac2g flow%'", [run]).fetchone() == (1,)
