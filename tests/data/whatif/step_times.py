"""Step times (and selected kernel time) of the what-if pairs, read from the raw trace JSON.

No tracedb, no DuckDB: json and gzip only, so a test can compare tracedb's prediction with a
value computed independently from the files.

    python step_times.py                  # check manifest.json's a_step_ns / b_step_ns / scale
    python step_times.py --write          # (re)write those fields into manifest.json
    python step_times.py PATH ...         # print the step time of each trace file or rank folder

Step time of a trace file: the median duration of its CPU-side ``ProfilerStep#N`` ranges
(complete events, ``cat`` "user_annotation"; the profiler's GPU-side copies, ``cat``
"gpu_user_annotation", are skipped). The profiler records only its active steps, so every
ProfilerStep range in the file is a steady step. Durations are microseconds with three
decimals in the JSON and become integer nanoseconds (round(dur * 1000)).

Step time of a folder of rank traces (``rank{R}.json.gz``, one job): for each step number the
longest of the ranks' ProfilerStep#N durations (the job's step ends when its last rank's does),
then the median over the step numbers.

Kernel time selected by a SQL LIKE pattern (``%`` any run, ``_`` one character, matched against
the whole kernel name, case-sensitive): the sum of the durations of the ``cat`` "kernel" events
so named, in ns. The scale pair's factor is that sum in B over that sum in A.
"""
import gzip
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def profiler_steps_ns(path):
    """{step number: duration ns} of the CPU-side ProfilerStep#N ranges of one trace."""
    out = {}
    for e in events(path):
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation" and re.fullmatch(r"ProfilerStep#\d+", name):
            out[int(name.split("#")[1])] = round(float(e["dur"]) * 1000)
    return out


def step_ns(path):
    """Median steady step time (ns) of a trace file or of a folder of rank traces."""
    full = os.path.join(HERE, path) if not os.path.isabs(path) else path
    if os.path.isdir(full):
        ranks = sorted(f for f in os.listdir(full) if re.fullmatch(r"rank\d+\.json(\.gz)?", f))
        per_rank = [profiler_steps_ns(os.path.join(full, f)) for f in ranks]
        common = set.intersection(*(set(s) for s in per_rank))
        return int(statistics.median(max(s[n] for s in per_rank) for n in sorted(common)))
    return int(statistics.median(profiler_steps_ns(full).values()))


def like_regex(pattern):
    return re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern), re.S)


def kernel_ns(path, like):
    """Total duration (ns) of the kernels whose name matches the LIKE pattern, and their count."""
    rx = like_regex(like)
    full = os.path.join(HERE, path) if not os.path.isabs(path) else path
    ks = [e for e in events(full) if e.get("cat") == "kernel" and rx.fullmatch(str(e.get("name", "")))]
    return sum(round(float(e["dur"]) * 1000) for e in ks), len(ks)


def measured(entry):
    """The fields of a manifest entry that come from the traces."""
    got = {"a_step_ns": step_ns(entry["a"]), "b_step_ns": step_ns(entry["b"])}
    like = entry["what_if"].get("kernel_like")
    if like is not None:
        a, _ = kernel_ns(entry["a"], like)
        b, _ = kernel_ns(entry["b"], like)
        got["scale"] = f"{b / a:.4f}"
    return got


def main(argv):
    if argv and argv[0] != "--write":
        for p in argv:
            print(f"{step_ns(os.path.abspath(p)):>12d} ns  {p}")
        return 0
    mpath = os.path.join(HERE, "manifest.json")
    with open(mpath) as f:
        manifest = json.load(f)
    bad = 0
    for entry in manifest:
        got = measured(entry)
        for key, value in got.items():
            have = entry["what_if"].get(key) if key == "scale" else entry.get(key)
            if argv:
                if key == "scale":
                    entry["what_if"]["scale"] = value
                else:
                    entry[key] = value
            elif have != value:
                bad += 1
                print(f"MISMATCH {entry['name']} {key}: manifest {have}, traces {value}")
        print(f"{entry['name']:10s} A {got['a_step_ns'] / 1e6:8.3f} ms  B {got['b_step_ns'] / 1e6:8.3f} ms"
              f"  B/A {got['b_step_ns'] / got['a_step_ns']:.3f}" + (f"  scale {got['scale']}" if "scale" in got else ""))
    if argv:
        with open(mpath, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
