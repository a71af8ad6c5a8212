"""Numbers and names for people: the one formatter of the terminal table, the HTML
report and the charts (machine formats, CSV, JSON and Parquet, keep exact values).

A column's unit suffix picks its display (the unit conventions of docs/schema.md):

    _ns       µs / ms / s (one unit per table column, picked by its median), 4 significant digits
    _bytes    KB / MB / GB (powers of 1000), 4 significant digits
    _pct      one decimal
    _w _j _mj _gbps _per_s _tflops   4 significant digits, the unit in the header
    cycles, counts (integers that are not ids)   integers with thousands separators
    ids (iteration, rank, stream, ..._id)        the integer as it is
    other floats                                 4 significant digits

Kernel and op names are shortened one way (`short_names`): return type, parameter
list, namespaces and template arguments elided (`multi_tensor_apply_kernel<…>`),
and where two different names would read the same, the least detail that tells
them apart is put back (the template arguments, then the namespaces, then the
whole name).
"""
import math
import re
from decimal import Decimal

# the unit token of a column name (the last one that is a unit) -> (kind, header label)
_UNIT_TOKENS = {
    "ns": ("time", None), "bytes": ("bytes", None), "pct": ("pct", "%"), "w": ("plain", "W"),
    "j": ("plain", "J"), "mj": ("plain", "mJ"), "pj": ("plain", "pJ"), "gbps": ("plain", "GB/s"),
    "tflops": ("plain", "TFLOP/s"), "gflops": ("plain", "GFLOP"), "gib": ("plain", "GiB"), "mhz": ("plain", "MHz"),
    "c": ("plain", "°C"),
}
_COUNT_TOKENS = {"cycles", "cycle", "inst", "instructions", "launches", "kernels", "calls", "events", "samples",
                 "count", "n", "flops", "elapsed", "sectors", "requests", "threads", "blocks", "warps", "bytes"}
_ID_TOKENS = {"iteration", "rank", "id", "stream", "seq", "gpu", "device", "pid", "tid", "correlation", "step",
              "index", "ordinal", "order", "world", "size", "tp", "pp", "dp", "year", "ord", "level", "group"}
_TIME_STEPS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))
_BYTE_STEPS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1.0, "B"))
NAME_COLUMNS = ("name", "kernel", "kernel_name", "op_name", "trace_name", "ncu_name", "op", "top_op", "first_kernel")


def is_name(col):
    """A column of kernel or op names (shortened for display)."""
    return col in NAME_COLUMNS or (col.endswith("_name") and col not in ("device_name", "run_name", "file_name"))


def unit_of(col):
    """(kind, label) of a column: kind time | bytes | pct | plain | count | id | None."""
    tokens = col.lower().split("_")
    if col.endswith("_per_s"):
        return "plain", "/s"
    if "pct" in tokens:
        return "pct", "% of iter" if tokens[-1] == "iter" else "%"
    for t in reversed(tokens):
        if t in _UNIT_TOKENS:
            return _UNIT_TOKENS[t]
    if tokens[-1] in _ID_TOKENS or col in ("iteration", "rank"):
        return "id", None
    if tokens and (tokens[-1] in _COUNT_TOKENS or tokens[0] in _COUNT_TOKENS or "cycles" in tokens):
        return "count", None
    return None, None


def _stripped(col):
    """The column name without its unit token: total_ns -> total, smsp_active_pct_iter -> smsp_active."""
    tokens = col.split("_")
    kind, _ = unit_of(col)
    if kind == "pct":
        drop = {"pct", "iter"} if tokens[-1] == "iter" else {"pct"}
        keep = [t for t in tokens if t not in drop]
    elif col.endswith("_per_s"):
        keep = tokens[:-2]
    elif kind in ("time", "bytes", "plain"):
        i = max(k for k, t in enumerate(tokens) if t.lower() in _UNIT_TOKENS)
        keep = tokens[:i] + tokens[i + 1:]
    else:
        return col
    return "_".join(keep) or col


def sig(x, digits=4):
    """x with `digits` significant digits (at least the integer part), thousands separated."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    mag = math.floor(math.log10(abs(x)))
    if mag >= digits - 1:
        return f"{x:,.0f}"
    decimals = min(digits - 1 - mag, 9)
    text = f"{x:.{decimals}f}"
    if abs(float(text)) == 0:
        return f"{x:.{digits - 1}e}"
    return text


def _step(x, steps):
    for factor, label in steps:
        if abs(x) >= factor * 0.9995:
            return factor, label
    return steps[-1]


def _num(v):
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() and abs(v) < 10 ** 18 else float(v)
    return v


def value(col, v):
    """One value of column col as text with its unit (`55.71 ms`, `1.2 GB`, `43.1 %`)."""
    v = _num(v)
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    kind, label = unit_of(col)
    if kind == "time":
        f, u = _step(v, _TIME_STEPS)
        return f"{sig(v / f)} {u}"
    if kind == "bytes":
        f, u = _step(v, _BYTE_STEPS)
        return f"{sig(v / f)} {u}" if f > 1 else f"{v:,} B" if isinstance(v, int) else f"{sig(v)} B"
    if kind == "pct":
        return f"{v:.1f} %" if label == "%" else f"{v:.1f} {label}"
    if kind == "plain":
        return f"{sig(v)} {label}"
    return _plain(kind, v)


def _plain(kind, v):
    """A number of a column without a unit: counts thousands separated, ids and other
    integers as they are, other floats to 4 significant digits."""
    if kind == "count" and abs(v) < 1e18:
        return f"{round(v):,}"
    if isinstance(v, int):
        return str(v)
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return sig(v)


def column(col, values):
    """(header, [text]) of a column shown in a table: one unit for the whole column
    (in the header, `total (ms)`), the cells numbers in it; None shown as ''."""
    vals = [_num(v) for v in values]
    nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)
            and (not isinstance(v, float) or math.isfinite(v))]
    kind, label = unit_of(col)
    factor, unit = 1.0, label
    if not nums:
        unit = {"time": "ms", "bytes": "MB"}.get(kind, label)
    elif kind in ("time", "bytes"):
        nonzero = sorted(abs(v) for v in nums if v) or [0]
        factor, unit = _step(nonzero[len(nonzero) // 2], _TIME_STEPS if kind == "time" else _BYTE_STEPS)
    head = f"{_stripped(col)} ({unit})" if unit else col

    def text(v):
        if v is None:
            return ""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return str(v)
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if kind in ("time", "bytes", "plain"):
            return sig(v / factor) if factor != 1 or isinstance(v, float) else f"{v:,}"
        if kind == "pct":
            return f"{v:.1f}"
        return _plain(kind, v)
    return head, [text(v) for v in vals]


# Vega-Lite (d3) formats of the same conventions, for chart tooltips and axes:
# shares with one decimal, other quantities to 4 significant digits.
D3_PCT = ".1f"
D3_SIG = ".4~r"


def d3_format(col):
    """The d3 format of column col's numbers in a chart (its unit already applied)."""
    kind, _ = unit_of(col)
    return D3_PCT if kind == "pct" else ",d" if kind == "count" else D3_SIG


# ---- names ------------------------------------------------------------------------

def _split_top(s, open_, close):
    """Spans (start, end) of the outermost open_...close_ groups of s."""
    spans, depth, start = [], 0, None
    for i, ch in enumerate(s):
        if ch == open_:
            if depth == 0:
                start = i
            depth += 1
        elif ch == close and depth:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    return spans


def _without_groups(s, open_, close, keep=""):
    out, last = [], 0
    for a, b in _split_top(s, open_, close):
        out.append(s[last:a] + keep)
        last = b
    return "".join(out) + s[last:]


_OPERATOR = re.compile(r"::operator\s*\(\)\s*(\([^()]*\))?(\s*const)?")


def _parts(name):
    """(qualified name without return type and parameter list, template argument text or None)."""
    s = name.strip()
    s = _OPERATOR.sub("", s)
    s = re.sub(r"\(anonymous namespace\)", "anon", s)
    # the parameter list: the last top-level (...) group at the end
    spans = _split_top(s, "(", ")")
    if spans and s[spans[-1][1]:].strip() in ("", "const") and spans[-1][0] > 0:
        s = s[:spans[-1][0]].rstrip()
    # the return type: what precedes the last space outside <...> and (...)
    cut = _last_top_space(s)
    if cut is not None and s[cut + 1:].strip() and not s[:cut].endswith(":"):
        s = s[cut + 1:].strip()
    tspans = _split_top(s, "<", ">")
    if tspans and tspans[-1][1] == len(s):
        return s[:tspans[-1][0]], s[tspans[-1][0] + 1:-1]
    return s, None


def _last_top_space(s):
    """The index of the last space of s outside <...> and (...), or None."""
    depth, last = 0, None
    for i, ch in enumerate(s):
        if ch in "<({":
            depth += 1
        elif ch in ">)}" and depth:
            depth -= 1
        elif ch == " " and depth == 0:
            last = i
    return last


def _last_component(qualified):
    """The name itself: the last `::` component that is not a lambda or operator."""
    flat = _without_groups(_without_groups(qualified, "<", ">", "<…>"), "(", ")", "(…)")
    comps = [c.strip() for c in flat.split("::") if c.strip()]
    for c in reversed(comps):
        if not c.startswith("{") and c != "anon":
            c = c.replace("(…)", "").strip() or c
            if comps[-1].startswith("{lambda"):      # a lambda: the function it is in, and its signature
                lam = qualified[qualified.rfind("{lambda"):]
                return f"{c}::" + re.sub(r"\b\w+::", "", lam)
            return c
    return comps[-1] if comps else qualified


def _args(targs):
    """Top-level template arguments of a <...> text."""
    out, depth, cur = [], 0, ""
    for ch in targs:
        if ch in "<({":
            depth += 1
        elif ch in ">)}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


LEVELS = 6


def short_name(name, level=0):
    """name shortened to `level` of detail:
    0: the name itself, `<…>` where it has template arguments;
    1: with its template arguments, each at level 0; 2: each at level 1;
    3: with its namespaces, template arguments elided;
    4: the name without its return type and parameter list;
    5: the name as it is.
    A name that is no C++ symbol (no `::`, no `<`) is left as it is."""
    if not isinstance(name, str) or level >= LEVELS - 1 or ("::" not in name and "<" not in name):
        return name
    qualified, targs = _parts(name)
    if level == 4:
        return qualified + (f"<{targs}>" if targs is not None else "")
    if level == 3:
        q = _without_groups(qualified, "<", ">", "<…>")
        q = re.sub(r"^(anon::)+", "", q)
        return q + ("<…>" if targs is not None else "")
    base = _last_component(qualified)
    if targs is None:
        return base
    if level == 0:
        return base + "<…>"
    return base + "<" + ", ".join(short_name(a, level - 1) for a in _args(targs)) + ">"


def short_names(names):
    """{name: shortened} for a set of names: each at level 0, raised for the names
    that would otherwise read the same as another name of the set."""
    names = [n for n in dict.fromkeys(names) if isinstance(n, str)]
    level = {n: 0 for n in names}
    for _ in range(LEVELS):
        seen = {}
        for n in names:
            seen.setdefault(short_name(n, level[n]), []).append(n)
        clashes = [group for group in seen.values() if len(group) > 1]
        if not clashes:
            break
        for group in clashes:
            for n in group:
                level[n] += 1
    return {n: short_name(n, level[n]) for n in names}
