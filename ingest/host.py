"""Host samples (tracedb capture's host sampler, host_log.py) -> `host_samples`.

The samples carry epoch ns from the same clock as the NVML sampler's; pairing
records the trace run (runs.paired_run) and the view trace_host_pairs maps them
onto its timeline.
"""
import json

import duckdb

from ..store.db import sql_text
from ..store.sql import rows, run_script, sql_literal
from .errors import IngestError
from .reader import Prepared, Reader, first_line, overlapping_in_time
from .source import hash_file, is_gzip

HEADER = "timestamp_ns,cpu,cpu_util_pct,rss_bytes"


class HostReader(Reader):
    """CSV of tracedb's host sampler: timestamp_ns, cpu, cpu_util_pct, rss_bytes."""
    kind = "host"
    pairs = True
    noun = "samples"

    def sniff(self, path, text):
        return "host-samples" if first_line(text).replace(" ", "").startswith(HEADER) else None

    def run_name(self, path):
        name = super().run_name(path)
        return name if "host" in name else name + "_host"

    def prepare(self, con, path, fmt, work, options):
        digest, size = hash_file(path)
        # read as text first: a cast in the same query is pushed into the reader, which then
        # fails on a bad value instead of giving NULL
        try:
            con.execute(f"""CREATE OR REPLACE TEMP TABLE _host_raw AS
                SELECT * FROM read_csv({sql_literal(path)}, header=true, auto_detect=false,
                                       columns={{'timestamp_ns': 'VARCHAR', 'cpu': 'VARCHAR',
                                                 'cpu_util_pct': 'VARCHAR', 'rss_bytes': 'VARCHAR'}},
                                       compression={sql_literal('gzip' if is_gzip(path) else 'none')})""")
        except duckdb.Error as e:
            raise IngestError(path, f"malformed host sample log ({str(e).splitlines()[0]})") from None
        con.execute("""CREATE OR REPLACE TEMP TABLE _host_src AS
            SELECT TRY_CAST(timestamp_ns AS BIGINT) AS ts_ns, TRY_CAST(cpu AS INTEGER) AS cpu,
                   TRY_CAST(cpu_util_pct AS DOUBLE) AS cpu_util_pct, TRY_CAST(rss_bytes AS BIGINT) AS rss_bytes,
                   TRY_CAST(timestamp_ns AS BIGINT) IS NULL
                     OR (nullif(trim(cpu), '') IS NOT NULL AND TRY_CAST(cpu AS INTEGER) IS NULL) AS bad
            FROM _host_raw""")
        con.execute("DROP TABLE _host_raw")
        n, bad = rows(con, "SELECT count(*), count(*) FILTER (bad) FROM _host_src")[0]
        if n == 0:
            raise IngestError(path, "the host sample log holds no samples")
        if bad:
            raise IngestError(path, f"{bad} of {n} host samples have a timestamp or cpu that is not a number")
        return Prepared(fmt, size, lambda: digest, state=n)

    def load(self, con, prep, run):
        run_script(con, sql_text("schema", "load/host.sql"), {"run": run})
        con.execute("DROP TABLE _host_src")
        return {"framework": "host", "n_events": prep.state, "metadata": json.dumps({"samples": prep.state})}

    def summary(self, con, run):
        n, s = rows(con, "SELECT count(DISTINCT ts_ns), (max(ts_ns) - min(ts_ns)) / 1e9 FROM host_samples "
                         "WHERE run = ?", [run])[0]
        return f"host: {n} samples, {s:.2f} s"

    def pair(self, con, run, trace_run, options):
        con.execute("UPDATE runs SET paired_run = ? WHERE run = ?", [trace_run, run])
        return f"paired with {trace_run}: epoch time (the clock of the NVML sampler)"

    def candidates(self, con, run, pool):
        return overlapping_in_time(con, "host_samples", run, pool)
