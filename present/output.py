"""Writing result tables: a terminal table (rich), CSV, JSON (one array), JSON lines, Parquet (all from Arrow).

The format is the one asked for, else the output file's extension, else a table on a
terminal and CSV into a pipe. The table fits the terminal: a one-row result is
printed vertically, `note` columns are never cut (they carry the caveats),
numbers are shown by their column's unit (humanize.py: `total (ms)`, counts
with thousands separators, 4 significant digits), and kernel and op names are
shortened (humanize.short_names) unless full_names. CSV, JSON and Parquet keep
the exact values.
"""
import contextlib
import decimal
import io
import os
import shutil
import sys

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from ..errors import TracedbError
from ..store.sql import finite, sql_ident

FORMATS = ("table", "csv", "json", "jsonl", "parquet")
EXTENSIONS = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
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


def short_name(name, level=0):
    """A kernel or op name shortened for display (humanize.short_name)."""
    from . import humanize
    return humanize.short_name(name, level)


def _is_name(col):
    from . import humanize
    return humanize.is_name(col)


def _cell(v):
    """A value that is not a number, as text."""
    if isinstance(v, bool):
        return str(v).lower()
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
    from . import humanize
    names = table.column_names
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
               for t in table.schema.types]
    columns = [[_number(v) for v in c.to_pylist()] for c in table.columns]      # by position: names may repeat
    vertical = table.num_rows == 1
    heads, shown = [], []
    for n, num, values in zip(names, numeric, columns):
        if num and not vertical:          # one unit per column, in its header: `total (ms)`
            head, texts = humanize.column(n, values)
        elif num:
            head, texts = n, [humanize.value(n, v) for v in values]
        elif humanize.is_name(n) and not full_names:
            short = humanize.short_names(v for v in values if isinstance(v, str))
            head, texts = n, [short.get(v, v) if isinstance(v, str) else _cell(v) for v in values]
        else:
            head, texts = n, [_cell(v) for v in values]
        heads.append(head)
        shown.append(["NULL" if v is None else t for v, t in zip(values, texts)])
    cells = [list(row) for row in zip(*shown)]
    need = []
    for i, (n, num) in enumerate(zip(heads, numeric)):
        longest = max([max(map(len, n.split(" ")))] + [len(c[i]) for c in cells])
        need.append(longest if num else min(longest, 40 if "note" in n else 14))
    if table.num_rows == 1 or sum(need) + 3 * (len(names) - 1) > width:
        # one row, or too wide for the terminal: each row as `column  value` lines
        for k, row in enumerate(cells):
            if table.num_rows > 1:
                console.print(f"-[ row {k + 1} ]" + "-" * max(0, min(width, 60) - 12 - len(str(k + 1))))
            t = Table(box=None, show_header=False, pad_edge=False)
            t.add_column(style="bold", no_wrap=True)
            t.add_column(overflow="fold")
            for n, c in zip(heads, row):      # one row: the value carries its unit; else the header
                t.add_row(n, c)
            console.print(t)
    else:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for n, num, w in zip(heads, numeric, _widths(heads, cells, need, width, numeric)):
            t.add_column(n, justify="right" if num else "left", overflow="fold", width=w)
        for row in cells:
            t.add_row(*row)
        console.print(t)
    console.print(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(l.rstrip() for l in console.file.getvalue().splitlines()).strip("\n") + "\n"


def _widths(heads, cells, need, width, numeric):
    """Each column's width: what it needs (numbers whole, text at most 14), and the
    room left given to the columns up to their longest value or header, the headers of
    numbers first, then the narrowest
    (rich, left to squeeze a table, crops the last columns)."""
    natural = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    widths = list(need)
    room = width - sum(widths) - 3 * (len(widths) - 1)      # padding and a rule between columns
    for i in sorted(range(len(widths)), key=lambda i: (not numeric[i], natural[i] - widths[i])):
        more = min(max(0, natural[i] - widths[i]), max(0, room))
        widths[i] += more
        room -= more
    return widths


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
    CSV, JSON, JSON lines and a Parquet file are written a batch at a time (a reader's
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


def _json_array(schema, batches, f):
    """One JSON array of the rows' objects (what json.load reads), written as the lines are."""
    return _json_lines(schema, batches, f, array=True)


def _json_lines(schema, batches, f, array=False):
    """JSON lines, each row's object written by DuckDB's `to_json` (C++, not a Python
    dict per row: 2.5 M rows in seconds, not minutes), in a scratch in-memory database;
    array: the same objects as one JSON array, one object a line."""
    con = duckdb.connect()
    line = "',' || chr(10) || to_json(r)" if array else "to_json(r) || chr(10)"
    first = array          # the array's first object: its leading comma is left out
    if array:
        f.write(b"[")
    # columns by position (c0, c1, ...): names may repeat or differ only in case, which
    # SQL cannot tell apart; a repeated name is written as DuckDB makes it unique (a, a_1)
    positions = [f"c{i}" for i in range(len(schema.names))]
    row, n = None, 0
    for b in batches:
        con.register("batch", (b if isinstance(b, pa.Table) else pa.Table.from_batches([b])).rename_columns(positions))
        if row is None:
            types = con.sql("SELECT * FROM batch").types
            row = ", ".join(f"{finite(f'c{i}', t)} AS {sql_ident(name)}" for i, (name, t) in enumerate(zip(schema.names, types)))
        lines = con.sql(f"SELECT {line} AS line FROM (SELECT {row} FROM batch) r").to_arrow_table()
        for text in lines.column(0).chunks:             # each line's bytes, one after another
            text = text.cast(pa.string())
            if not len(text):
                continue
            _, offsets, data = text.buffers()
            offsets = memoryview(offsets).cast("i")
            f.write(memoryview(data)[offsets[text.offset] + (1 if first else 0):offsets[text.offset + len(text)]])
            first = False
        n += b.num_rows
    con.close()
    if array:
        f.write(b"\n]\n" if n else b"]\n")
    return n


_WRITERS = {"csv": _with(pacsv.CSVWriter), "json": _json_array, "jsonl": _json_lines,
            "parquet": _with(pq.ParquetWriter)}


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
