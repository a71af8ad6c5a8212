"""cuda_bench output (CSV of points, or JSON with "cuda_bench" metadata and
"points") -> the `calibration` table. The fits are computed in SQL
(view calibration_fits), not read from the file."""
import hashlib
import json

from ..store.sql import rows, scalar, sql_literal
from .errors import IngestError
from .reader import Prepared, Reader, first_line
from .source import open_bytes

REQUIRED = ("gpu", "level", "threads_per_block", "blocks", "accesses", "energy_j")
OPTIONAL = {"dur_ns": "BIGINT", "sm_clock_mhz": "DOUBLE", "mem_clock_mhz": "DOUBLE", "temp_c": "DOUBLE",
            "valid": "BOOLEAN", "array_bytes": "BIGINT", "hit_rate_pct": "DOUBLE", "note": "VARCHAR",
            "counted": "DOUBLE", "check_shape": "VARCHAR", "sweep_pass": "INTEGER"}
TYPES = {"gpu": "VARCHAR", "level": "VARCHAR", "threads_per_block": "INTEGER", "blocks": "INTEGER",
         "accesses": "DOUBLE", "energy_j": "DOUBLE", **OPTIONAL}
LEVELS = ("shared", "l1", "l2", "dram")


def prepare(con, path, work):
    data = open_bytes(path).read()
    digest = hashlib.sha256(data).hexdigest()
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    meta = {}
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise IngestError(path, f"calibration JSON is malformed ({e})") from None
        points = doc.get("points")
        if not isinstance(points, list) or not points:
            raise IngestError(path, "calibration JSON has no \"points\" list")
        meta = doc.get("cuda_bench") or {}
        src = f"{work}/points.json"
        with open(src, "w") as f:
            json.dump(points, f)
        con.execute(f"CREATE OR REPLACE TEMP TABLE _cal_raw AS SELECT * FROM read_json({sql_literal(src)}, format='array')")
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _cal_raw AS SELECT * FROM read_csv({sql_literal(path)}, header=true, all_varchar=true)")
    names = {r[0] for r in rows(con, "SELECT column_name FROM (DESCRIBE _cal_raw)")}
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise IngestError(path, f"calibration points lack the columns {', '.join(missing)}")
    cols = {c: (f"TRY_CAST({c} AS {t})" if c in names else ("true" if c == "valid" else f"NULL::{t}"))
            for c, t in TYPES.items()}
    con.execute(f"CREATE OR REPLACE TEMP TABLE _cal AS SELECT {', '.join(f'{v} AS {k}' for k, v in cols.items())} FROM _cal_raw")
    bad = scalar(con, f"""SELECT count(*) FROM _cal WHERE gpu IS NULL OR level NOT IN {LEVELS}
                          OR threads_per_block IS NULL OR blocks IS NULL OR accesses IS NULL
                          OR energy_j IS NULL OR isnan(energy_j) OR isnan(accesses)""")
    n = scalar(con, "SELECT count(*) FROM _cal")
    if n == 0:
        raise IngestError(path, "no calibration points")
    if bad:
        raise IngestError(path, f"{bad} of {n} calibration points have a missing or non-numeric value "
                                f"or a level other than {', '.join(LEVELS)}")
    return digest, len(data), meta


def load(con, run, meta):
    con.execute("""INSERT INTO calibration (run, gpu, level, threads_per_block, blocks, accesses, energy_j,
                       dur_ns, sm_clock_mhz, mem_clock_mhz, temp_c, valid, reference, array_bytes,
                       hit_rate_pct, note, counted, check_shape, sweep_pass)
                   SELECT ?, gpu, level, threads_per_block, blocks, accesses, energy_j, dur_ns, sm_clock_mhz,
                          mem_clock_mhz, temp_c, coalesce(valid, true), false, array_bytes, hit_rate_pct, note,
                          counted, check_shape, sweep_pass
                   FROM _cal""", [run])
    n, gpu = rows(con, "SELECT count(*), any_value(gpu) FROM _cal")[0]
    con.execute("DROP TABLE _cal")
    con.execute("DROP TABLE _cal_raw")
    return {"framework": "cuda_bench", "device_name": gpu, "metadata": json.dumps(meta), "n_events": n}


class CalibrationReader(Reader):
    """cuda_bench output: JSON with "cuda_bench" metadata and "points", or a points CSV."""
    kind = "calibration"
    noun = "points"

    def sniff(self, path, text):
        t = text()
        if t[:1] in "{[" and '"cuda_bench"' in t[:4096]:
            return "cuda_bench-json"
        first = first_line(text).lower()
        if t[:1] not in "{[" and "level" in first and "energy_j" in first and "power" not in first:
            return "cuda_bench-csv"
        return None

    def prepare(self, con, path, fmt, work, options):
        digest, size, meta = prepare(con, path, work)
        return Prepared(fmt, size, lambda: digest, state=meta)

    def load(self, con, prep, run):
        return load(con, run, prep.state)
