"""Writing result tables: a terminal table (rich), CSV, JSON lines, Parquet (all from Arrow).

The format is the one asked for, else the output file's extension, else a table on a
terminal and CSV into a pipe. The table fits the terminal: a one-row result is
printed vertically, `note` columns are never cut (they carry the caveats),
integers are printed in full, floats to 4 significant digits, and kernel names
lose their template and argument lists unless full_names.
"""
import contextlib
import decimal
import io
import os
import re
import shutil
import sys

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from ..errors import TracedbError
from ..store.sql import finite, sql_ident

FORMATS = ("table", "csv", "json", "parquet")
EXTENSIONS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet",
              ".pq": "parquet", ".txt": "table"}


class OutputError(TracedbError, ValueError):
    """An output that cannot be written (bad extension, missing folder)."""


def choose_format(fmt, out, tty):
    """The format to write: the one asked for, else out's extension, else table on a terminal."""
    if out and os.path.isdir(str(out)):
        raise OutputError(f"{out}: is a directory: give a file name for -o")
    if fmt:
        return fmt
    if out:
        ext = os.path.splitext(str(out))[1].lower()
        if ext not in EXTENSIONS:
            raise OutputError(f"{out}: unknown extension {ext or '(none)'!r}: use "
                              f"{', '.join(sorted(EXTENSIONS))} or give --format")
        return EXTENSIONS[ext]
    return "table" if tty else "csv"


_TEMPLATE = re.compile(r"<[^<>]*>")


def short_name(name):
    """A kernel name without template arguments and parameter list, for display:
    `void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` ->
    `at::native::vectorized_elementwise_kernel<…>`."""
    if not isinstance(name, str) or ("<" not in name and "(" not in name):
        return name
    s = name
    while True:                          # innermost <...> first, until none is left
        t = _TEMPLATE.sub("\0", s)
        if t == s:
            break
        s = t
    s = re.sub("\0+", "<…>", s)
    s = re.sub(r"\(.*\)\s*$", "", s) if not s.startswith("(") else s
    return re.sub(r"^void\s+", "", s).strip() or name


def _is_name(col):
    return col in ("name", "kernel", "kernel_name", "op_name", "trace_name", "ncu_name", "op") or col.endswith("_name")


def _cell(v, full_names=False, name_col=False):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        if v == int(v) and abs(v) < 1e15:
            return str(int(v)) if abs(v) >= 1e4 else f"{v:.4g}"
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.1f}".replace(",", "")
    if name_col and not full_names:
        return short_name(str(v))
    return str(v)


def _number(v):
    """A DECIMAL (or HUGEINT) as the int or float it is printed as; one too large
    for a float's digits as its own text."""
    if not isinstance(v, decimal.Decimal):
        return v
    if v.as_tuple().exponent >= 0:
        return int(v)
    return float(v) if abs(v) < 10 ** 15 else v


def render(table: pa.Table, width=None, full_names=False) -> str:
    """The table as text that fits `width` columns (rich); one row -> column: value lines."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    width = width or _width()
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None,
                      highlight=False, soft_wrap=False)
    names = table.column_names
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
               for t in table.schema.types]
    columns = [c.to_pylist() for c in table.columns]      # by position: names may repeat
    cells = [[_cell(_number(v), full_names, _is_name(n)) for n, v in zip(names, row)] for row in zip(*columns)]
    need = []
    for i, (n, num) in enumerate(zip(names, numeric)):
        longest = max([len(n)] + [len(c[i]) for c in cells])
        need.append(longest if num else min(longest, 40 if "note" in n else 16))
    if table.num_rows == 1 or sum(need) + 3 * len(names) > width:
        # one row, or too wide for the terminal: each row as `column  value` lines
        for k, row in enumerate(cells):
            if table.num_rows > 1:
                console.print(f"-[ row {k + 1} ]" + "-" * max(0, min(width, 60) - 12 - len(str(k + 1))))
            t = Table(box=None, show_header=False, pad_edge=False)
            t.add_column(style="bold", no_wrap=True)
            t.add_column(overflow="fold")
            for n, c in zip(names, row):
                t.add_row(n, c)
            console.print(t)
    else:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for n, num, w in zip(names, numeric, need):
            t.add_column(n, justify="right" if num else "left", overflow="fold", no_wrap=num,
                         min_width=w if not num else None)
        for row in cells:
            t.add_row(*row)
        console.print(t)
    console.print(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(l.rstrip() for l in console.file.getvalue().splitlines()).strip("\n") + "\n"


def _width():
    """The terminal's width; 200 into a pipe or file (a width there is arbitrary)."""
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return 200


def check(fmt, out=None):
    """The format write() will use for fmt and out; OutputError where it cannot
    (called before a long query too, so that a bad -o fails first)."""
    fmt = choose_format(fmt, out, sys.stdout.isatty())
    if fmt not in FORMATS:
        raise OutputError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if out is not None and not str(out).strip():
        raise OutputError("-o: empty file name")
    if out is not None:
        folder = os.path.dirname(os.path.abspath(str(out)))
        if not os.path.isdir(folder):
            raise OutputError(f"{out}: folder {folder} does not exist")
    if fmt == "parquet" and out is None and sys.stdout.isatty():
        raise OutputError("--format parquet writes binary: give -o FILE or redirect stdout")
    return fmt


def write(table, fmt, out=None, full_names=False):
    """Write table (a pyarrow Table or RecordBatchReader) in fmt (None: by out's
    extension) to the path `out`, or to stdout; returns the number of rows written.
    CSV, JSON lines and a Parquet file are written a batch at a time (a reader's
    rows are never all held), a file under a temporary name until it is whole."""
    fmt = check(fmt, out)
    if fmt == "table":             # fitted to every row's width
        table = table if isinstance(table, pa.Table) else table.read_all()
        text = render(table, width=None if out is None else 200, full_names=full_names)
        with _sink(out) as f:
            f.write(text.encode())
        return table.num_rows
    batches = [table] if isinstance(table, pa.Table) else table      # tables or record batches
    with _sink(out) as f:
        return _WRITERS[fmt](table.schema, batches, f)


def _with(writer):
    """Write the batches with an Arrow writer class (CSV, Parquet); the row count."""
    def write(schema, batches, f):
        n = 0
        with writer(f, schema) as w:
            for b in batches:
                w.write(b)
                n += b.num_rows
        return n
    return write


def _json_lines(schema, batches, f):
    """JSON lines, each row's object written by DuckDB's `to_json` (C++, not a Python
    dict per row: 2.5 M rows in seconds, not minutes), in a scratch in-memory database."""
    con = duckdb.connect()
    # columns by position (c0, c1, ...): names may repeat or differ only in case, which
    # SQL cannot tell apart; a repeated name is written as DuckDB makes it unique (a, a_1)
    positions = [f"c{i}" for i in range(len(schema.names))]
    row, n = None, 0
    for b in batches:
        con.register("batch", (b if isinstance(b, pa.Table) else pa.Table.from_batches([b])).rename_columns(positions))
        if row is None:
            types = con.sql("SELECT * FROM batch").types
            row = ", ".join(f"{finite(f'c{i}', t)} AS {sql_ident(name)}" for i, (name, t) in enumerate(zip(schema.names, types)))
        lines = con.sql(f"SELECT to_json(r) || chr(10) AS line FROM (SELECT {row} FROM batch) r").to_arrow_table()
        for text in lines.column(0).chunks:             # each line's bytes, one after another
            text = text.cast(pa.string())
            _, offsets, data = text.buffers()
            offsets = memoryview(offsets).cast("i")
            f.write(memoryview(data)[offsets[text.offset]:offsets[text.offset + len(text)]])
        n += b.num_rows
    con.close()
    return n


_WRITERS = {"csv": _with(pacsv.CSVWriter), "json": _json_lines, "parquet": _with(pq.ParquetWriter)}


@contextlib.contextmanager
def _sink(out):
    """A binary stream to write to: stdout, or out. A new file, or a plain one that
    is replaced, is written under a temporary name beside it and renamed once whole
    (with the mode of the file it replaces), so an error part-way leaves no
    half-written out; anything else (a link, a device, /dev/fd/N) is written as it is."""
    if out is None:
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    out = str(out)
    whole = not os.path.lexists(out) or (os.path.isfile(out) and not os.path.islink(out))
    path = os.path.join(os.path.dirname(os.path.abspath(out)), f".{os.path.basename(out)}.{os.getpid()}.partial") \
        if whole else out
    try:
        with open(path, "wb") as f:
            yield f
        if whole:
            if os.path.exists(out):
                shutil.copymode(out, path)
            os.replace(path, out)
    except OSError as e:
        if whole:
            _remove(path)
        raise OutputError(f"{out}: cannot write ({e.strerror})") from None
    except BaseException:
        if whole:
            _remove(path)
        raise


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
