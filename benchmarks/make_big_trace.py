"""Large Kineto traces for ingest benchmarks, fast: the output of
../shared/tools/scale_trace.py byte for byte (tests/test_big_trace.py checks it on a
few copies), but each event is serialized once as a template and its shifted
times and ids are filled in per copy, so 10 GB take minutes instead of an hour.

usage: python benchmarks/make_big_trace.py SOURCE.json[.gz] COPIES OUT.json [--jobs N] [--ranks N]
--jobs N: the copies written by N processes into parts, then joined (10 GB in a minute
on 16 cores instead of three).
--ranks N: OUT is a directory of N rank traces (rank0.json ...), each COPIES copies with
distributedInfo {rank, world_size N} in its head (so each is a file of its own content).
"""
import os
import gzip
import json
import sys

_KEYS = ("ts", "id", "correlation", "External id", "step")


def _open(path, mode):
    return gzip.open(path, mode + "t") if path.endswith(".gz") else open(path, mode)


def _template(e):
    """(parts, fields): json.dumps(e, indent=2) cut where the per-copy values go."""
    c = json.loads(json.dumps(e))
    fields = []
    if isinstance(c.get("ts"), (int, float)) and isinstance(c.get("pid"), int):
        fields.append(("ts", c["ts"]))
        c["ts"] = "\x00ts\x00"
    if isinstance(c.get("id"), int):
        fields.append(("id", c["id"]))
        c["id"] = "\x00id\x00"
    a = c.get("args")
    if isinstance(a, dict):
        for k in ("correlation", "External id"):
            if isinstance(a.get(k), int) and a[k] > 0:
                fields.append((k, a[k]))
                a[k] = f"\x00{k}\x00"
        if isinstance(c.get("name"), str) and c["name"].startswith("ProfilerStep#"):
            fields.append(("step", int(c["name"].split("#")[1])))
            c["name"] = "\x00step\x00"
    text = json.dumps(c, indent=2)
    at = sorted((text.index(json.dumps(f"\x00{k}\x00")), k, v) for k, v in fields)
    parts, order, pos = [], [], 0
    for start, key, value in at:
        parts.append(text[pos:start])
        pos = start + len(json.dumps(f"\x00{key}\x00"))
        order.append((key, value))
    parts.append(text[pos:])
    return parts, order


def main(src, copies, out, jobs=1, rank=None):
    with _open(src, "r") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and isinstance(e.get("pid"), int)]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = (t1 - t0) * 1.01
    ids = [e["args"].get(k, 0) for e in events for k in ("correlation", "External id") if isinstance(e.get("args"), dict)]
    ids += [e["id"] for e in events if isinstance(e.get("id"), int)]
    id_step = max(ids + [0]) + 1
    meta = [e for e in events if e.get("ph") == "M"]
    body = [_template(e) for e in events if e.get("ph") != "M"]
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    if rank is not None:
        head["distributedInfo"] = {"backend": "nccl", "rank": rank[0], "world_size": rank[1]}
    start = json.dumps(head)[:-1] + ', "traceEvents": [\n' + ",\n".join(json.dumps(e, indent=2) for e in meta)
    if jobs <= 1 or out.endswith(".gz"):
        return _write(out, start, body, range(copies), not meta, span, id_step, True)
    import multiprocessing
    cuts = [copies * k // jobs for k in range(jobs + 1)]
    parts = [(f"{out}.part{k}", start if k == 0 else "", body, range(cuts[k], cuts[k + 1]),
              k == 0 and not meta, span, id_step, k == jobs - 1) for k in range(jobs)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        pool.starmap(_write, parts)
    with open(out, "wb") as f:
        for p in parts:
            with open(p[0], "rb") as g:
                while os.copy_file_range(g.fileno(), f.fileno(), 1 << 30):
                    pass
            os.remove(p[0])


def _write(out, start, body, copies, first, span, id_step, last):
    with _open(out, "w") as f:
        f.write(start)
        for i in copies:
            chunk = []
            for parts, order in body:
                out_parts = [parts[0]]
                for (key, v), part in zip(order, parts[1:]):
                    if key == "ts":      # as scale_trace: copy 0 rounded in place, later copies from it
                        s = json.dumps(round(round(v + 0 * span, 3) + i * span, 3))
                    elif key == "step":
                        s = json.dumps("ProfilerStep#%d" % (v + i))
                    else:
                        s = str(v + i * id_step)   # ids, correlation, External id
                    out_parts += [s, part]
                chunk.append(("" if first else ",\n") + "".join(out_parts))
                first = False
            f.write("".join(chunk))
        if last:
            f.write("\n]}\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    jobs = int(args[args.index("--jobs") + 1]) if "--jobs" in args else 1
    ranks = int(args[args.index("--ranks") + 1]) if "--ranks" in args else 0
    args = [a for i, a in enumerate(args) if a not in ("--jobs", "--ranks")
            and (i == 0 or args[i - 1] not in ("--jobs", "--ranks"))]
    if len(args) != 3:
        sys.exit(__doc__)
    if ranks:
        os.makedirs(args[2], exist_ok=True)
        for r in range(ranks):
            main(args[0], int(args[1]), os.path.join(args[2], f"rank{r}.json"), jobs, (r, ranks))
    else:
        main(args[0], int(args[1]), args[2], jobs)
