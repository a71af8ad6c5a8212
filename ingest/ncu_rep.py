""".ncu-rep reports through NVIDIA's `ncu_report` module -> the same temp tables as CSV.

The module ships with Nsight Compute (extras/python), not on PyPI. It gives
values in base units already, with the unit of each metric. It is run in a
child process (ncu_rep_dump.py), which writes CSV that DuckDB reads.
"""
import glob
import os
import shutil
import subprocess
import sys

from ..store.sql import sql_literal
from .errors import IngestError
from .source import hash_file

SEARCH = ("/opt/nvidia/nsight-compute/*/extras/python",
          "/usr/local/cuda*/nsight-compute*/extras/python")
DUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ncu_rep_dump.py")


def find_ncu_report():
    """The folder holding ncu_report.py: from sys.path, next to `ncu` on PATH, or the
    usual install places; None when there is none. (Not imported here: see ncu_rep_dump.)"""
    places = list(sys.path)
    ncu = shutil.which("ncu")
    if ncu:
        real = os.path.realpath(ncu)
        places.append(os.path.join(os.path.dirname(real), "extras", "python"))
        places += glob.glob(os.path.join(os.path.dirname(os.path.dirname(real)), "nsight-compute*",
                                         "extras", "python"))
    for pattern in SEARCH:
        places += sorted(glob.glob(pattern), reverse=True)
    for p in places:
        if p and os.path.exists(os.path.join(p, "ncu_report.py")):
            return p
    return None


def load(con, path, work):
    """Read a .ncu-rep into _ncu_identity, _ncu_values and _ncu_device_values.
    Returns (form, hexdigest, bytes)."""
    module_dir = find_ncu_report()
    if module_dir is None:
        raise IngestError(path, ".ncu-rep files are read through NVIDIA's ncu_report module (it ships "
                                "with Nsight Compute in extras/python), which is not found here: "
                                "export CSV with `ncu --import FILE --csv --page raw > FILE.csv` "
                                "and ingest that")
    digest, size = hash_file(path)
    done = subprocess.run([sys.executable, DUMP, module_dir, os.path.abspath(path), work],
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise IngestError(path, f"ncu_report cannot read it ({last})")
    ident, vals = os.path.join(work, "identity.csv"), os.path.join(work, "values.csv")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _ncu_identity AS
        SELECT kernel_id, NULL::VARCHAR AS process_id, NULL::VARCHAR AS process_name,
               NULL::VARCHAR AS host_name, name, context, stream, block_size, grid_size, device,
               NULL::VARCHAR AS cc
        FROM read_csv({sql_literal(ident)}, header=true, all_varchar=true)""")
    con.execute("ALTER TABLE _ncu_identity ALTER kernel_id TYPE BIGINT")
    if not con.execute("SELECT count(*) FROM _ncu_identity").fetchall()[0][0]:
        raise IngestError(path, "the report holds no profiled kernels")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _ncu_values AS
        SELECT CAST(kernel_id AS BIGINT) AS kernel_id, metric, nullif(unit, '') AS unit, value_text
        FROM read_csv({sql_literal(vals)}, header=true, all_varchar=true)""")
    con.execute("""CREATE OR REPLACE TEMP TABLE _ncu_device_values AS
        SELECT metric, unit, value_text FROM _ncu_values
        WHERE metric LIKE 'device__attribute_%' AND kernel_id = 0""")
    return "ncu-rep", digest, size
