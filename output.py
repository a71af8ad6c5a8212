"""Writing result tables: aligned text, CSV, JSON lines, Parquet (all from Arrow)."""
import io
import json
import sys

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

FORMATS = ("table", "csv", "json", "parquet")


def _cell(v):
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.6g}"
    s = str(v)
    return s if len(s) <= 60 else s[:57] + "..."


def text_table(table: pa.Table) -> str:
    rows = [[_cell(v) for v in r.values()] for r in table.to_pylist()]
    head = table.column_names
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
               for t in table.schema.types]
    fmt = lambda cells: "  ".join(c.rjust(w) if n else c.ljust(w)
                                  for c, w, n in zip(cells, widths, numeric)).rstrip()
    lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
    lines.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(lines) + "\n"


def write(table: pa.Table, fmt, out=None):
    """Write table in fmt to the path `out`, or to stdout."""
    if fmt == "parquet":
        if out is None:
            if sys.stdout.isatty():
                raise ValueError("--format parquet writes binary: give -o FILE or redirect stdout")
            buf = io.BytesIO()
            pq.write_table(table, buf)
            sys.stdout.buffer.write(buf.getvalue())
        else:
            pq.write_table(table, out)
        return
    if fmt == "table":
        text = text_table(table)
    elif fmt == "csv":
        buf = io.BytesIO()
        pacsv.write_csv(table, buf)
        text = buf.getvalue().decode()
    elif fmt == "json":
        text = "".join(json.dumps(r, default=str) + "\n" for r in table.to_pylist())
    else:
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if out is None:
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)
