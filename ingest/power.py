"""NVML power logs -> the `power` table: our sampler's CSV (`tracedb power-log`)
and nvidia-smi `--query-gpu ... --format=csv[,noheader][,nounits]` logs.

DuckDB reads the file as text; schema/load_power.sql converts units
(`W`, `MHz`, `[N/A]`) and times. nvidia-smi prints local date-times: they are
read in the time zone given at ingest (default: this machine's) and the zone
used is kept in runs.metadata.
"""
import csv
import datetime as dt
import json
import re
import warnings
from zoneinfo import ZoneInfo

import duckdb

from ..store.db import sql_text
from ..store.sql import rows, run_script, scalar, sql_ident, sql_literal
from .match import MatchError
from .errors import IngestError
from .reader import Prepared, Reader, first_line, overlapping_in_time
from .source import head, open_bytes, plain_copy

SMI_TIME = re.compile(r"^\s*(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)?)\s*,")
# nvidia-smi query names (with or without "current.") -> power table columns
SMI_FIELDS = {
    "timestamp": "ts", "index": "gpu", "power.draw": "power_w",
    "power.draw.instant": "instant_power_w", "power.draw.average": "average_power_w", "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz", "clocks.mem": "mem_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz", "temperature.gpu": "temp_c",
    "utilization.gpu": "gpu_util_pct", "utilization.memory": "mem_util_pct", "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib", "clocks_event_reasons.active": "throttle_reasons",
    "clocks_throttle_reasons.active": "throttle_reasons",
}
# The system columns (gpu_samples) of a power log, NULL where the log has none.
SYSTEM_COLUMNS = ("gpu_util_pct", "mem_util_pct", "mem_used_bytes", "mem_total_bytes", "throttle_reasons",
                  "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
# NVML's PCIe throughput is in KB/s (1024 bytes, as nvidia-smi dmon divides it).
KB = 1024
SAMPLER_COLUMNS = {"timestamp_ns", "power_mw"}


def sniff(path):
    """'sampler' | 'nvidia-smi' | 'nvidia-smi-noheader' for a power log, else IngestError."""
    text = head(path).decode("utf-8", "replace").lstrip("\ufeff")
    first = text.splitlines()[0] if text else ""
    cols = [c.strip() for c in first.split(",")]
    if SAMPLER_COLUMNS <= set(cols):
        return "sampler"
    if cols and cols[0] == "timestamp" and any(c.split(" [")[0] in SMI_FIELDS for c in cols[1:]):
        return "nvidia-smi"
    if SMI_TIME.match(first):
        return "nvidia-smi-noheader"
    if first.startswith("#Entity"):
        return "dcgm"
    raise IngestError(path, "unknown power log: expected tracedb power-log CSV (timestamp_ns, power_mw, ...) "
                            "or nvidia-smi --query-gpu=timestamp,... --format=csv output")


# dcgmi dmon field names -> (sampler column, factor to the sampler's unit)
DCGM_FIELDS = {"POWER": ("power_mw", 1e3), "TOTEC": ("energy_mj", 1.0), "SMCLK": ("sm_clock_mhz", 1.0),
               "MMCLK": ("mem_clock_mhz", 1.0), "TMPTR": ("temp_c", 1.0), "GTEMP": ("temp_c", 1.0)}


def _dcgm_meta(options):
    return {"start_ns": int(options["start_ns"]), "interval_ms": float(options["interval_ms"]),
            "timestamps": "start_ns + row x interval_ms (dcgmi dmon prints none)"}


def _dcgm_to_sampler(path, options, work):
    """`dcgmi dmon -e 155,156,100,101,150 -d MS` text -> our sampler's CSV. dmon prints
    no timestamps: they come from --start-ns (the first row) and --interval-ms (-d)."""
    if options.get("start_ns") is None or options.get("interval_ms") is None:
        raise IngestError(path, "dcgmi dmon output carries no timestamps: give --start-ns (epoch ns of "
                                "its first row) and --interval-ms (its -d), or log with tracedb power-log")
    text = open_bytes(path).read().decode("utf-8", "replace")
    cols, rows_out, seen = None, [], {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "#Entity":
            cols = parts[1:]
            continue
        if parts[0] in ("ID", "#") or cols is None or parts[0] != "GPU" or len(parts) < 2 + len(cols):
            continue
        gpu = int(parts[1])
        i = seen.get(gpu, 0)
        seen[gpu] = i + 1
        row = {"timestamp_ns": int(options["start_ns"]) + int(i * float(options["interval_ms"]) * 1e6), "gpu": gpu}
        for name, value in zip(cols, parts[2:]):
            if name in DCGM_FIELDS:
                col, f = DCGM_FIELDS[name]
                try:
                    row[col] = float(value) * f
                except ValueError:          # N/A
                    row[col] = ""
        rows_out.append(row)
    if cols is None or not any("power_mw" in r for r in rows_out):
        raise IngestError(path, "dcgmi dmon output without a POWER (field 155) column or GPU rows")
    out = f"{work}/dcgm.csv"
    names = ["timestamp_ns", "gpu", "power_mw", "energy_mj", "sm_clock_mhz", "mem_clock_mhz", "temp_c"]
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows_out)
    return out


def _smi_raw(con, path, form, options, work, plain):
    """An nvidia-smi --query-gpu log -> the temp table _power_raw (text columns named
    after the power table's, ts first), parsed by DuckDB's CSV reader. Returns
    (source, whether the last line was cut off and dropped)."""
    text = head(path).decode("utf-8", "replace").lstrip("\ufeff")
    if form == "nvidia-smi":
        header = [c.strip() for c in text.splitlines()[0].split(",")]
    else:
        fields = (options or {}).get("columns")
        if not fields:
            raise IngestError(path, "nvidia-smi log without a header line: give the --query-gpu list "
                                    "it was made with, e.g. --columns timestamp,index,power.draw")
        header = [c.strip() for c in fields.split(",")]
    keys, taken = [], set()
    for i, c in enumerate(header):
        k = SMI_FIELDS.get(c.split(" [")[0].strip()) or f"_c{i}"
        keys.append(k if k not in taken else f"_c{i}")     # a second column for the same quantity: kept aside
        taken.add(k)
    if "ts" not in keys:
        raise IngestError(path, "nvidia-smi log has no timestamp column")
    if not {"power_w", "instant_power_w", "average_power_w"} & set(keys):
        raise IngestError(path, "nvidia-smi log has no power.draw column")
    src = plain
    cols = "{" + ", ".join(f"{sql_literal(k)}: 'VARCHAR'" for k in keys) + "}"
    try:
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _power_raw AS
            SELECT * FROM read_csv({sql_literal(src)}, header=false, skip={1 if form == 'nvidia-smi' else 0},
                                   delim=',', quote='', escape='', columns={cols}, auto_detect=false,
                                   null_padding=true, strict_mode=false, compression='none')
            WHERE trim(coalesce(ts, '')) <> ''""")
    except duckdb.Error as e:
        raise IngestError(path, f"malformed nvidia-smi log ({str(e).splitlines()[0]})") from None
    last = keys[-1]
    cut = bool(scalar(con, f"SELECT {sql_ident(last)} IS NULL FROM _power_raw "
                           f"ORDER BY rowid DESC LIMIT 1"))
    if cut:
        con.execute("DELETE FROM _power_raw WHERE rowid = (SELECT max(rowid) FROM _power_raw)")
        warnings.warn(f"{path}: last line is cut off; it was dropped")
    units = {k: (c.split(" [", 1)[1].rstrip("]").strip() if " [" in c else None) for k, c in zip(keys, header)}
    return src, cut, units


def _lf_copy(src, work):
    """A copy of src with CRLF (or lone CR) line ends as LF."""
    out = f"{work}/lf.csv"
    with open(src, "rb") as f, open(out, "wb") as g:
        carry = b""
        while chunk := f.read(1 << 20):
            chunk = carry + chunk
            carry = b"\r" if chunk.endswith(b"\r") else b""
            chunk = chunk[:-1] if carry else chunk
            g.write(chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
        g.write(b"\n" if carry else b"")
    return out


def _without_last_line(src, work):
    """A copy of src up to its last newline (a sampler log whose writer was killed
    mid-line: the cut line would load as a wrong number, and confuses the CSV sniffer)."""
    with open(src, "rb") as f:
        f.seek(0, 2)
        end = f.tell()
        while end > 0:
            f.seek(max(0, end - 65536))
            block = f.read(end - max(0, end - 65536))
            k = block.rfind(b"\n")
            if k >= 0:
                end = max(0, end - 65536) + k + 1
                break
            end = max(0, end - 65536)
        out = f"{work}/whole_lines.csv"
        f.seek(0)
        with open(out, "wb") as g:
            left = end
            while left > 0 and (chunk := f.read(min(1 << 20, left))):
                g.write(chunk)
                left -= len(chunk)
    return out


def _milli(k, header_unit):
    """SQL factor to the power table's unit for a column of nvidia-smi text: values
    printed in mW (in the header's [mW] or after the number) are divided by 1000."""
    if header_unit == "mW":
        return "1e-3"
    if k.endswith("_w"):
        return f"CASE WHEN regexp_matches({k}, '[0-9.]\\s*mW\\s*$') THEN 1e-3 ELSE 1 END"
    return "1"


def _check_ns(con, path):
    """Refuse sampler timestamps that are not epoch nanoseconds: negative or fractional
    values, or a median step between samples under 10 µs (NVML cannot sample that fast;
    seconds or milliseconds step by 0 or a few units)."""
    ((neg, frac),) = rows(con, """SELECT     -- the first of each, in one scan
        arg_min(timestamp_ns, rowid) FILTER (WHERE TRY_CAST(timestamp_ns AS HUGEINT) < 0),
        arg_min(timestamp_ns, rowid) FILTER (WHERE timestamp_ns LIKE '%.%' OR lower(timestamp_ns) LIKE '%e%')
        FROM _power_raw""")
    step = scalar(con, """SELECT median(d) FROM (SELECT TRY_CAST(timestamp_ns AS HUGEINT)
                              - lag(TRY_CAST(timestamp_ns AS HUGEINT)) OVER (ORDER BY rowid) AS d FROM _power_raw)
                          WHERE d > 0""")
    if neg is not None:
        raise IngestError(path, f"timestamp_ns holds {neg.strip()!r}: before 1970, not epoch nanoseconds; "
                                "write nanoseconds (time.time_ns())")
    if frac is not None or (step is not None and step < 10_000):
        shown = f"a value {frac.strip()!r}" if frac is not None else f"samples {int(step)} apart"
        raise IngestError(path, f"timestamp_ns holds {shown}: not epoch nanoseconds (seconds or "
                                "milliseconds?); write nanoseconds (time.time_ns())")


def _tz_offset_ns(first_stamp, tz):
    """UTC offset (ns) of the zone at the log's first local time."""
    zone = ZoneInfo(tz) if tz else dt.datetime.now().astimezone().tzinfo
    t = dt.datetime.strptime(first_stamp.split(".")[0], "%Y/%m/%d %H:%M:%S")
    off = t.replace(tzinfo=zone).utcoffset() if tz else zone.utcoffset(None)
    return int(off.total_seconds() * 1e9), (tz or str(dt.datetime.now().astimezone().tzname()))


def prepare(con, path, options, work):
    """Read the log into the temp table _power_raw (text) and describe it."""
    form = sniff(path)
    plain, digest, size, whole_last_line = plain_copy(path, work)
    if b"\r" in head(path):    # CR line ends (a CRLF log cut after its CR, CR alone, CR CR LF): as LF
        plain = _lf_copy(plain, work)
        with open(plain, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 1))
            whole_last_line = f.read(1) in (b"\n", b"")
    meta = {"format": form}
    src = plain
    if form == "sampler" and not whole_last_line:
        src = _without_last_line(plain, work)
        warnings.warn(f"{path}: last line is cut off; it was dropped")
        meta["truncated_last_line"] = True
    if form == "dcgm":
        src, meta = _dcgm_to_sampler(path, options or {}, work), {"format": form, **_dcgm_meta(options)}
        form = "sampler"
    if form == "sampler":
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _power_raw AS
            SELECT * FROM read_csv({sql_literal(src)}, header=true, all_varchar=true, auto_detect=true)""")
        names = [r[0] for r in rows(con, "SELECT column_name FROM (DESCRIBE _power_raw)")]
        _check_ns(con, path)
        sel = {"ts_ns": "TRY_CAST(timestamp_ns AS BIGINT)",
               "gpu": "TRY_CAST(gpu AS INTEGER)" if "gpu" in names else "0",
               "power_w": f"{_finite('power_mw')} / 1e3",
               "energy_j": f"{_finite('energy_mj')} / 1e3" if "energy_mj" in names else "NULL",
               "instant_power_w": f"{_finite('instant_power_mw')} / 1e3" if "instant_power_mw" in names else "NULL",
               "sm_clock_mhz": "TRY_CAST(sm_clock_mhz AS DOUBLE)" if "sm_clock_mhz" in names else "NULL",
               "mem_clock_mhz": "TRY_CAST(mem_clock_mhz AS DOUBLE)" if "mem_clock_mhz" in names else "NULL",
               "temp_c": "TRY_CAST(temp_c AS DOUBLE)" if "temp_c" in names else "NULL",
               "phase": "phase" if "phase" in names else "NULL", "average_power_w": "NULL",
               **{k: (f"TRY_CAST({k} AS DOUBLE)" if k in names else "NULL")
                  for k in ("gpu_util_pct", "mem_util_pct")},
               **{k: (f"TRY_CAST({k} AS BIGINT)" if k in names else "NULL")
                  for k in ("mem_used_bytes", "mem_total_bytes", "throttle_reasons")},
               **{f"pcie_{d}_bytes_per_s": (f"TRY_CAST(pcie_{d}_kb_per_s AS DOUBLE) * {KB}"
                                             if f"pcie_{d}_kb_per_s" in names else "NULL") for d in ("tx", "rx")},
               "bad": "TRY_CAST(timestamp_ns AS BIGINT) IS NULL OR (power_mw IS NOT NULL AND TRY_CAST(power_mw AS DOUBLE) IS NULL)",
               "not_finite": " OR ".join(f"NOT isfinite(TRY_CAST({k} AS DOUBLE))" for k in
                                         ("power_mw", "energy_mj", "instant_power_mw") if k in names)}
    else:
        src, cut, units = _smi_raw(con, path, form, options, work, plain)
        keys = [r[0] for r in rows(con, "SELECT column_name FROM (DESCRIBE _power_raw)")]
        first = scalar(con, "SELECT ts FROM _power_raw LIMIT 1")
        if first is None:
            raise IngestError(path, "the power log holds no samples")
        try:
            off, zone = _tz_offset_ns(first.strip(), (options or {}).get("tz"))
        except ValueError:
            raise IngestError(path, f"timestamp {first.strip()!r} is not a number or date "
                                    "(expected YYYY/MM/DD HH:MM:SS.mmm)") from None
        except KeyError as e:
            raise IngestError(path, f"unknown time zone {e}") from None
        meta.update(timezone=zone, utc_offset_ns=off, truncated_last_line=bool(cut))
        num = lambda k: (f"(TRY_CAST(regexp_extract({k}, '^\\s*(-?[0-9.]+)', 1) AS DOUBLE) * "
                         f"{_milli(k, units.get(k))})") if k in keys else "NULL"
        # Each power column is kept as written; power_integral chooses (METHOD.md section 6).
        sel = {"ts_ns": f"epoch_ns(TRY_STRPTIME(trim(ts), ['%Y/%m/%d %H:%M:%S.%g', '%Y/%m/%d %H:%M:%S'])) - {off}",
               "gpu": "TRY_CAST(gpu AS INTEGER)" if "gpu" in keys else "0",
               "power_w": num("power_w"), "energy_j": "NULL", "instant_power_w": num("instant_power_w"),
               "average_power_w": num("average_power_w"),
               "sm_clock_mhz": num("sm_clock_mhz"), "mem_clock_mhz": num("mem_clock_mhz"),
               "temp_c": num("temp_c"), "phase": "NULL",
               "gpu_util_pct": num("gpu_util_pct"), "mem_util_pct": num("mem_util_pct"),
               "mem_used_bytes": f"CAST({num('mem_used_mib')} * 1048576 AS BIGINT)",
               "mem_total_bytes": f"CAST({num('mem_total_mib')} * 1048576 AS BIGINT)",
               "throttle_reasons": "TRY_CAST(trim(throttle_reasons) AS BIGINT)" if "throttle_reasons" in keys else "NULL",
               "pcie_tx_bytes_per_s": "NULL", "pcie_rx_bytes_per_s": "NULL",
               "bad": "TRY_STRPTIME(trim(ts), ['%Y/%m/%d %H:%M:%S.%g', '%Y/%m/%d %H:%M:%S']) IS NULL",
               "not_finite": "false"}
    con.execute(f"CREATE OR REPLACE TEMP TABLE _power_src AS SELECT {', '.join(f'{v} AS {k}' for k, v in sel.items())} "
                "FROM _power_raw")
    n, bad, mended, no_power = rows(con, """
        SELECT count(*), count(*) FILTER (bad), count(*) FILTER (not_finite),
               count(*) FILTER (coalesce(instant_power_w, power_w, average_power_w) IS NULL) FROM _power_src""")[0]
    if n == 0:
        raise IngestError(path, "the power log holds no samples")
    if bad:
        first = scalar(con, "SELECT row_number FROM (SELECT bad, row_number() OVER () AS row_number FROM _power_src) "
                            "WHERE bad LIMIT 1")
        raise IngestError(path, f"{bad} of {n} samples have a timestamp or power that is not a number "
                                f"(first at data row {first})")
    if no_power == n:
        raise IngestError(path, "the power log holds no samples with a power")
    if mended:
        warnings.warn(f"{path}: {mended} samples have a power or energy of NaN or infinity, read as no value "
                      "(NULL) so that no sum becomes NaN")
    if no_power:
        # power_integral leaves them out, so the energy is integrated across them (kept
        # in its window, a NULL power summed the two trapezoids beside it to nothing)
        warnings.warn(f"{path}: {no_power} of {n} samples have no power (NaN, empty or [N/A]): the energy is "
                      "integrated across them; their other columns are kept")
    meta["samples"] = n
    return digest, size, meta


def _finite(col):
    """A logged number, NULL where it is NaN or infinite (DuckDB reads 'nan' and 'inf')."""
    return f"CASE WHEN isfinite(TRY_CAST({col} AS DOUBLE)) THEN TRY_CAST({col} AS DOUBLE) END"


def load(con, path, run, meta):
    run_script(con, sql_text("schema", "load/power.sql"), {"run": run})
    info = rows(con, """SELECT count(DISTINCT gpu), min(ts_ns), max(ts_ns),
                               quantile_cont(coalesce(instant_power_w, power_w, average_power_w), 0.05)
                        FROM power WHERE run = ?""", [run])[0]
    meta.update(gpus=info[0], start_ns=info[1], end_ns=info[2], idle_power_w_p05=info[3])
    con.execute("DROP TABLE IF EXISTS _power_raw")
    con.execute("DROP TABLE IF EXISTS _power_src")
    return {"framework": "nvml", "metadata": json.dumps(meta), "n_events": meta["samples"]}


def align(con, power_run, trace_run, offset_ns=None):
    """Record how power_run's clock maps onto trace_run's timeline; returns a sentence."""
    base = scalar(con, "SELECT base_time_ns FROM runs WHERE run = ?", [trace_run]) or 0
    t0, t1 = rows(con, "SELECT min(ts_ns), max(ts_ns + coalesce(dur_ns, 0)) FROM events "
                       "WHERE run = ? AND ph <> 'M'", [trace_run])[0]
    if t0 is None:
        raise MatchError(f"trace run {trace_run!r} has no timed events to align the power log with")
    p0, p1 = rows(con, "SELECT min(ts_ns), max(ts_ns) FROM power WHERE run = ?", [power_run])[0]
    if offset_ns is not None:
        method, off, note = "offset", int(offset_ns), "offset given at ingest"
    elif base > 0:
        method, off, note = "absolute", 0, "Kineto baseTimeNanoseconds: both clocks are epoch ns"
    else:
        method, off = "window-start", t0 - p0
        note = ("trace has no absolute time: the log's first sample is put at the trace's first event "
                "(log with tracedb power-log started together with the profiler, or give --offset-ns)")
    inside = p0 + off <= t0 and t1 <= p1 + off
    if not inside:
        note += f"; the trace window is not inside the logged window ({(t0 - p0 - off) / 1e9:+.3f} s at the start, " \
                f"{(p1 + off - t1) / 1e9:+.3f} s at the end)"
    con.execute("INSERT OR REPLACE INTO power_alignment VALUES (?, ?, ?, ?, ?)",
                [power_run, trace_run, off, method, note])
    con.execute("UPDATE runs SET paired_run = ? WHERE run = ?", [trace_run, power_run])
    return f"aligned with {trace_run}: {method} ({note})"


class PowerReader(Reader):
    """Power logs: tracedb power-log CSV, nvidia-smi --query-gpu CSV (with or
    without header and units), dcgmi dmon."""
    kind = "power"
    pairs = True
    noun = "samples"
    pairing_tables = ("power_alignment",)
    pairing_column = "power_run"

    def sniff(self, path, text):
        first = first_line(text).lower()
        if ("power" in first and ("timestamp" in first or "index" in first or "#entity" in first)) \
                or SMI_TIME.match(first) or first.startswith("#entity") or "dcgm" in first:
            return "power-log"
        return None

    def run_name(self, path):
        name = super().run_name(path)
        return name if re.search(r"power|smi|nvml", name, re.I) else name + "_power"

    def prepare(self, con, path, fmt, work, options):
        digest, size, meta = prepare(con, path, options, work)
        return Prepared(meta["format"], size, lambda: digest, state=(path, meta))

    def load(self, con, prep, run):
        return load(con, *prep.state[:1], run, prep.state[1])

    def summary(self, con, run):
        n, g, s = rows(con, "SELECT count(*), count(DISTINCT gpu), (max(ts_ns) - min(ts_ns)) / 1e9 "
                            "FROM power WHERE run = ?", [run])[0]
        return f"power: {n} samples, {g} GPU(s), {s:.2f} s"

    def pair(self, con, run, trace_run, options):
        return align(con, run, trace_run, options.get("offset_ns"))

    def candidates(self, con, run, pool):
        return overlapping_in_time(con, "power", run, pool)

    def paired_note(self, con, trace):
        got = rows(con, "SELECT power_run FROM power_alignment WHERE trace_run = ? ORDER BY power_run", [trace])
        if len(got) > 1:
            return (f"note: trace {trace} has {len(got)} power logs paired ({', '.join(r[0] for r in got)}); "
                    f"the energy reports give a row per power log (--param power_run=RUN picks one)")
        return None
