"""An Nsight Systems export's rows, many at once: SQLite writes a range of a table's
rows as one CSV text in C (group_concat of printf, one call from Python for the
whole range instead of a tuple per row) and Arrow's CSV reader parses it in C++ on
several threads, into the same Arrow table the row-at-a-time read gives
(ingest/nsys.py's _arrow: pos, then the columns under nsys_rows.sql's names).

Text is quoted with its quotes doubled, so commas, quotes and line breaks in NVTX
text pass unchanged; NULL is an empty field, the empty string a quoted one. A value
that is not of its column's type (SQLite types values, not columns: a fraction in an
id column, text where a number belongs, bytes that are no UTF-8) makes the parse
fail, and the caller reads that range row by row instead, which coerces values one
by one (nsys.py's _coerce): both reads give the same table.
"""
import io

import pyarrow as pa
import pyarrow.csv as pcsv


def csv_select(select, names, text):
    """The SELECT of one row: the CSV text of select's rows (whose columns are named
    names) as bytes, a line per row, the columns in names' order, those in text
    quoted (printf's %w doubles their quotes; NULL is an empty field, the empty
    string a quoted one), or NULL when select has no row; and the number of rows."""
    cells = [f"""iif("{n}" IS NULL, '', printf('"%w"', "{n}"))""" if n in text else f'"{n}"' for n in names]
    fmt = ",".join(["%s"] * len(names))
    return (f"SELECT CAST(group_concat(printf('{fmt}', {', '.join(cells)}), char(10)) AS BLOB), count(*) "
            f"FROM ({select})")


def parse(data, names, text, n_rows):
    """data (bytes from csv_select) as an Arrow table: pos (the row's position), then
    names, text columns as strings and the others as int64. Raises pa.ArrowInvalid
    where a field is not of its column's type, or the rows are not n_rows."""
    # Arrow's reader looks for line breaks inside quoted values only when told to,
    # which costs it several times the time: told when the text has more than the
    # lines' own (memchr-fast counts)
    breaks = data.count(b"\n") != n_rows - 1 or b"\r" in data
    types = {n: pa.string() if n in text else pa.int64() for n in names}
    table = pcsv.read_csv(
        io.BytesIO(data),
        read_options=pcsv.ReadOptions(column_names=list(names), block_size=8 << 20),
        parse_options=pcsv.ParseOptions(delimiter=",", quote_char='"', double_quote=True, escape_char=False,
                                        newlines_in_values=bool(breaks), ignore_empty_lines=False),
        convert_options=pcsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True,
                                            quoted_strings_can_be_null=False, check_utf8=True))
    table = table.combine_chunks()
    if table.num_rows != n_rows:
        raise pa.ArrowInvalid(f"{table.num_rows} rows parsed of {n_rows}")
    return table.add_column(0, "pos", pa.array(range(table.num_rows), pa.int64()))
