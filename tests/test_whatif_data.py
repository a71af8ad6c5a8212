"""The what-if validation pairs (tests/data/whatif): the manifest agrees with its traces, and
each pair's change is one a prediction can be judged by (B clearly faster, not free)."""
import importlib.util
import json
import os

import pytest

HERE = os.path.join(os.path.dirname(__file__), "data", "whatif")
PARAMS = {"remove_cpu_like", "remove_syncs", "zero_launch_overhead", "scale", "kernel_like",
          "remove_rank_lateness", "overlap_comm"}


def _step_times():
    spec = importlib.util.spec_from_file_location("whatif_step_times", os.path.join(HERE, "step_times.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ST = _step_times()
with open(os.path.join(HERE, "manifest.json")) as f:
    MANIFEST = json.load(f)


def test_manifest_names_and_files():
    names = [e["name"] for e in MANIFEST]
    assert len(names) == len(set(names)) == 8
    for e in MANIFEST:
        for side in ("a", "b"):
            assert os.path.exists(os.path.join(HERE, e[side])), e[side]
        assert set(e["what_if"]) <= PARAMS and all(isinstance(v, str) for v in e["what_if"].values())
        assert e["change"]


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["name"] for e in MANIFEST])
def test_manifest_matches_the_traces(entry):
    got = ST.measured(entry)
    assert got["a_step_ns"] == entry["a_step_ns"] and got["b_step_ns"] == entry["b_step_ns"]
    if "scale" in got:
        assert got["scale"] == entry["what_if"]["scale"]


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["name"] for e in MANIFEST])
def test_change_is_large_but_not_everything(entry):
    """B at least 5% faster than A (a 'no change' prediction cannot pass a 5% check), also
    outside the profiler, and B is still at least 20% of A (nor can a 'zero' one)."""
    for a, b in ((entry["a_step_ns"], entry["b_step_ns"]),
                 (entry["a_step_ns_unprofiled"], entry["b_step_ns_unprofiled"])):
        assert 0.2 * a < b < 0.95 * a, (entry["name"], a, b)


def test_scale_pair_selects_one_gemm_per_step_with_one_name():
    entry = next(e for e in MANIFEST if "kernel_like" in e["what_if"])
    like = ST.like_regex(entry["what_if"]["kernel_like"])
    for side in ("a", "b"):
        evs = ST.events(os.path.join(HERE, entry[side]))
        names = {e["name"] for e in evs if e.get("cat") == "kernel" and like.fullmatch(e["name"])}
        steps = len(ST.profiler_steps_ns(os.path.join(HERE, entry[side])))
        assert len(names) == 1 and ST.kernel_ns(entry[side], entry["what_if"]["kernel_like"])[1] == steps
    assert 0.45 < float(entry["what_if"]["scale"]) < 0.55   # half the K of the same GEMM


def test_like_pattern_is_sql_like():
    rx = ST.like_regex("enumerate(DataLoader)%")
    assert rx.fullmatch("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    assert not rx.fullmatch("x enumerate(DataLoader)#")
    assert ST.like_regex("a_c").fullmatch("abc") and not ST.like_regex("a_c").fullmatch("abbc")
