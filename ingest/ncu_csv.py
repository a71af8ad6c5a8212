"""Nsight Compute CSV exports (`--page raw` and `--page details`) -> DuckDB temp tables.

ncu mixes its own `==PROF==`/`==WARNING==` lines and the application's output
with the CSV when it prints to a terminal. One streaming pass copies only the
CSV lines to a temporary file (hashing the content as it goes); DuckDB's
reader then parses that file in parallel, every value as text. Values are
converted to numbers and base units in SQL (schema/load_ncu.sql).

Both forms end as two temp tables:
  _ncu_identity(kernel_id, process_id, process_name, host_name, name, context,
                stream, block_size, grid_size, device, cc)
  _ncu_values(kernel_id, metric, unit, value_text)   (a view over the CSV for --page raw)
  _ncu_device_values(metric, unit, value_text)      device__attribute_* of the first kernel
"""
import csv
import os
import warnings
from dataclasses import dataclass, field

import duckdb

from ..store.sql import sql_ident, sql_literal
from .errors import IngestError
from .source import open_bytes

# Columns that identify a kernel launch rather than measure it.
IDENTITY = {
    "ID": "kernel_id", "Process ID": "process_id", "Process Name": "process_name",
    "Host Name": "host_name", "Kernel Name": "name", "Context": "context", "Stream": "stream",
    "Block Size": "block_size", "Grid Size": "grid_size", "Device": "device", "CC": "cc",
}
DETAILS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
HEADER_START = b'"ID",'


def is_header(line):
    """The CSV header line of an ncu export: quoted fields holding "ID" and "Kernel Name"
    (in any order: a user's tool may have reordered the columns)."""
    return line.startswith(b'"') and b'"ID"' in line and b'"Kernel Name"' in line
MAX_PREAMBLE_BYTES = 16 << 20
# Columns of a CSV export past which it is refused (a --page raw export of every
# metric ncu knows has a few thousand; 100,000 took 209 s and 3.4 GB in DuckDB's reader)
MAX_COLUMNS = 20000
BOM = b"\xef\xbb\xbf"


@dataclass
class CleanCsv:
    path: str                  # the CSV lines only, header first
    header: list
    form: str                  # raw | details
    content_bytes: int
    dropped_lines: int = 0     # non-CSV lines (ncu/app messages)
    truncated: bool = False
    notes: list = field(default_factory=list)


def clean(path, out_path, hasher):
    """Copy the CSV lines of an ncu export to out_path; hash the whole content."""
    header = None
    dropped = content = 0
    last = b""
    with open_bytes(path) as src, open(out_path, "wb") as dst:
        for line in src:
            hasher.update(line)
            content += len(line)
            if header is None:
                if content == len(line) and line.startswith(BOM):       # a byte-order mark (Excel, PowerShell)
                    line = line[len(BOM):]
                if line.startswith(HEADER_START) or is_header(line):
                    if line.count(b",") >= MAX_COLUMNS:
                        raise IngestError(path, f"ncu CSV header has {line.count(b',') + 1} columns, more than "
                                                f"{MAX_COLUMNS}: not an ncu export tracedb reads (ncu writes one "
                                                "column per metric: export fewer metrics)")
                    header = next(csv.reader([line.decode("utf-8", "replace")]))
                    dst.write(line)
                elif content > MAX_PREAMBLE_BYTES:
                    break
                continue
            if line.startswith(b'"'):
                if last:
                    dst.write(last)
                last = line
            elif line.strip():
                dropped += 1
        truncated = bool(last) and not last.rstrip(b"\r\n").endswith(b'"')
        if last and not truncated:
            dst.write(last if last.endswith(b"\n") else last + b"\n")
    if header is None:
        raise IngestError(path, 'not an Nsight Compute CSV export: no header line with "ID" and "Kernel Name" columns')
    if "Kernel Name" not in header:
        raise IngestError(path, 'ncu CSV header has no "Kernel Name" column')
    present = [c for c in DETAILS if c in header]
    if present and len(present) < len(DETAILS):
        missing = ", ".join(c for c in DETAILS if c not in header)
        raise IngestError(path, f"ncu --page details CSV without its {missing} column(s): cannot read its metrics")
    form = "details" if present else "raw"
    if truncated:
        warnings.warn(f"{path}: last line is cut off; it was dropped")
    return CleanCsv(out_path, header, form, content, dropped, truncated)


def _read(con, cc):
    types = "{" + ", ".join(f"{sql_literal(c)}: 'VARCHAR'" for c in cc.header) + "}"
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _ncu_csv AS SELECT * FROM read_csv("
        f"{sql_literal(cc.path)}, header=true, delim=',', quote='\"', escape='\"', columns={types}, "
        "auto_detect=false, max_line_size=67108864)")


def _identity_select(header):
    cols = []
    for src, dst in IDENTITY.items():
        cols.append(f"{sql_ident(src)} AS {dst}" if src in header else f"NULL::VARCHAR AS {dst}")
    return ", ".join(cols)


def load(con, path, work):
    """Parse an ncu CSV export into _ncu_identity and _ncu_values. Returns (CleanCsv, hexdigest)."""
    import hashlib
    hasher = hashlib.sha256()
    cc = clean(path, os.path.join(work, "ncu.csv"), hasher)
    try:
        _read(con, cc)
    except duckdb.Error as e:
        raise IngestError(path, f"malformed ncu CSV ({str(e).splitlines()[0]})") from None
    if cc.dropped_lines:
        cc.notes.append(f"{cc.dropped_lines} non-CSV lines skipped")
    ident = _identity_select(cc.header)
    data = "(SELECT * FROM _ncu_csv WHERE TRY_CAST(\"ID\" AS BIGINT) IS NOT NULL)"
    _check_rows(con, path, cc, data)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _ncu_identity AS
        SELECT * REPLACE (CAST(kernel_id AS BIGINT) AS kernel_id) FROM (SELECT {ident} FROM {data})
        QUALIFY row_number() OVER (PARTITION BY kernel_id) = 1""")
    if cc.form == "details":
        con.execute(f"""CREATE OR REPLACE TEMP VIEW _ncu_values AS
            SELECT CAST("ID" AS BIGINT) AS kernel_id,
                   coalesce(l.metric, d."Metric Name") AS metric,
                   d."Metric Unit" AS unit, d."Metric Value" AS value_text
            FROM {data} d
            LEFT JOIN ncu_metric_labels l ON l.label = d."Metric Name"
            WHERE coalesce(d."Metric Name", '') <> ''
            QUALIFY row_number() OVER (PARTITION BY "ID", coalesce(l.metric, d."Metric Name")) = 1""")
        con.execute("""CREATE OR REPLACE TEMP TABLE _ncu_device_values AS
            SELECT metric, unit, value_text FROM _ncu_values
            WHERE metric LIKE 'device__attribute_%'
              AND kernel_id = (SELECT min(kernel_id) FROM _ncu_values)""")
    else:
        metrics = [c for c in cc.header if c not in IDENTITY]
        if not metrics:
            raise IngestError(path, "ncu CSV has no metric columns")
        device = [c for c in metrics if c.startswith("device__attribute_")]
        measured = [c for c in metrics if c not in device]
        if not measured:
            raise IngestError(path, "ncu CSV has no measured metric columns (device attributes only)")
        units_row = "(SELECT * FROM _ncu_csv WHERE coalesce(\"ID\", '') = '' LIMIT 1)"
        first_row = f"(SELECT * FROM {data} ORDER BY CAST(\"ID\" AS BIGINT) LIMIT 1)"

        def long(cols, source, value="value_text"):
            return (f"(UNPIVOT (SELECT \"ID\", {', '.join(sql_ident(c) for c in cols)} FROM {source}) "
                    f"ON {', '.join(sql_ident(c) for c in cols)} INTO NAME metric VALUE {value})")
        # Device attributes repeat on every row: read them from the first row only.
        if device:
            con.execute(f"""CREATE OR REPLACE TEMP TABLE _ncu_device_values AS
                SELECT v.metric, u.unit, v.value_text FROM {long(device, first_row)} v
                LEFT JOIN {long(device, units_row, 'unit')} u USING (metric)""")
        else:
            con.execute("CREATE OR REPLACE TEMP TABLE _ncu_device_values "
                        "(metric VARCHAR, unit VARCHAR, value_text VARCHAR)")
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _ncu_units AS
            SELECT metric, unit FROM {long(measured, units_row, 'unit')}""")
        # A view: the long form (kernels x metrics rows) is never held in memory at once.
        con.execute(f"""CREATE OR REPLACE TEMP VIEW _ncu_values AS
            SELECT CAST(v."ID" AS BIGINT) AS kernel_id, v.metric, u.unit, v.value_text
            FROM {long(measured, data)} v LEFT JOIN _ncu_units u USING (metric)""")
    return cc, hasher.hexdigest()


# Numbers ncu printed in a locale with decimal commas or dot thousands separators
# ("0,002912", "1.980.000", "1.234,5"); "1,980,000" (C locale) is not among them.
LOCALE_NUMBER = r'^-?[0-9]+,[0-9]+$|^-?[0-9]{1,3}(\.[0-9]{3}){2,}$|^-?[0-9]{1,3}(\.[0-9]{3})+,[0-9]+$'
C_THOUSANDS = r'^-?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?$'


def _check_rows(con, path, cc, data):
    """Refuse what would load wrong numbers: two rows of one kernel ID (raw form), no
    units row (raw form), numbers in a locale format."""
    if cc.form == "raw":
        cols = [c for c in cc.header if c not in IDENTITY]
        if not cols:
            return                      # refused below, with its own message
        dup = con.execute(f'SELECT "ID", count(*) FROM {data} GROUP BY 1 HAVING count(*) > 1 '
                          'ORDER BY TRY_CAST("ID" AS BIGINT) LIMIT 1').fetchone()
        if dup:
            raise IngestError(path, f"kernel ID {dup[0]} is on {dup[1]} rows (two exports joined?): "
                                    "a --page raw export has one row per kernel")
        if not con.execute('SELECT count(*) FROM _ncu_csv WHERE coalesce("ID", \'\') = \'\'').fetchone()[0]:
            raise IngestError(path, "ncu CSV without its units row (the line after the header that "
                                    "ncu --csv --page raw prints): its values cannot be read without units")
    else:
        other = [c for c in ("Process ID", "Kernel Name") if c in cc.header]
        ident = ", ".join(map(sql_ident, other))
        dup = con.execute(f'SELECT "ID" FROM {data} GROUP BY 1 HAVING count(DISTINCT ({ident})) > 1 LIMIT 1'
                          ).fetchone() if other else None
        if dup:
            raise IngestError(path, f"kernel ID {dup[0]} names two different kernels (two exports joined?)")
        cols = ["Metric Value"]
    values = (f"(UNPIVOT (SELECT {', '.join(sql_ident(c) for c in cols)} FROM {data}) "
              f"ON {', '.join(sql_ident(c) for c in cols)} INTO NAME metric VALUE v)")
    hit = con.execute(f"SELECT v FROM {values} WHERE regexp_matches(v, $loc) AND NOT regexp_matches(v, $c) "
                      "LIMIT 1", {"loc": LOCALE_NUMBER, "c": C_THOUSANDS}).fetchone()
    if hit:
        raise IngestError(path, f"numbers are printed in a locale format ({hit[0]!r}): export again "
                                "with LC_ALL=C (LC_ALL=C ncu --import R.ncu-rep --csv ...) so they read right")


def drop(con):
    """Drop the temp tables and views that a reader made."""
    for name, kind in con.execute(
            "SELECT view_name, 'VIEW' FROM duckdb_views() WHERE temporary AND view_name LIKE '\\_ncu\\_%' ESCAPE '\\' "
            "UNION ALL SELECT table_name, 'TABLE' FROM duckdb_tables() "
            "WHERE temporary AND table_name LIKE '\\_ncu\\_%' ESCAPE '\\'").fetchall():
        con.execute(f"DROP {kind} IF EXISTS {name}")
