"""DuckDB settings of a connection: one for a block (then back to DuckDB's own), the
memory cap of a load or an export, the ASOF join plan. A value its user set is left alone."""
import functools
import re
from contextlib import contextmanager

import duckdb

from .sql import scalar, sql_literal


@contextmanager
def setting(con, name, value):
    """DuckDB's setting `name` at value for the block, then back to its default
    (RESET); None leaves it as it is, and so does a configuration locked by a sandboxed
    connection of this process to the same file (store/sandbox.py). Outside a transaction
    (no SET in an aborted one)."""
    if value is not None and scalar(con, "SELECT current_setting('lock_configuration')"):
        value = None
    if value is not None:
        con.execute(f"SET {name} = {sql_literal(value)}")
    try:
        yield
    finally:
        if value is not None:
            con.execute(f"RESET {name}")


# DuckDB's memory limit while a trace loads or is exported, whatever its size: the
# events are staged in batches (ingest/trace.py) and exported in windows
# (perfetto.py), and the sorts and joins beyond it spill to DuckDB's temp directory
# (docs/benchmarks.md: peak RSS per trace size).
MEMORY_CAP = 1 << 30

_UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


@functools.cache
def default_setting(name):
    """DuckDB's own value of a setting (a new in-memory database's): a different
    value on a connection is one its user set."""
    return duckdb.connect().execute(f"SELECT current_setting('{name}')").fetchone()[0]


def unless_set(con, name, value):
    """value, or None (for setting(): leave it) where the connection's setting `name`
    is not DuckDB's own: a value its user set is theirs."""
    return value if scalar(con, f"SELECT current_setting('{name}')") == default_setting(name) else None


@contextmanager
def memory_cap(con, cap=None):
    """DuckDB's memory limit lowered to cap (default MEMORY_CAP) for the block (a
    trace's load, an export), whatever the trace's size: what does not fit spills to
    disk instead of growing with the trace. A limit the user set is left alone; the
    default comes back exactly (RESET). Wraps the transaction (no SET in an aborted one)."""
    cap = MEMORY_CAP if cap is None else cap
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]?i?B)", default_setting("memory_limit") or "")
    lower = m is not None and float(m[1]) * _UNITS[m[2]] > cap
    with setting(con, "memory_limit", unless_set(con, "memory_limit", f"{cap}B") if lower else None):
        yield


@contextmanager
def cap_changed(con, cap, to):
    """Inside memory_cap(con, cap): DuckDB's limit set to `to` for the block, raised (a
    step whose hash tables and sorts cannot spill enough on many threads) or lowered (a
    step whose sorts would fill the cap: ingest/trace._derive_cap), then back to cap;
    left as it is where the limit is not cap (the user's own). On an error the limit is
    left for memory_cap's exit, which comes after the rollback (no SET in an aborted
    transaction)."""
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]?i?B)", scalar(con, "SELECT current_setting('memory_limit')") or "")
    ours = m is not None and abs(float(m[1]) * _UNITS[m[2]] - cap) < (1 << 20)
    if ours:
        con.execute(f"SET memory_limit = '{to}B'")
    yield
    if ours:
        con.execute(f"SET memory_limit = '{cap}B'")


def fit_threads(con):
    """DuckDB's threads cut to the cores this process may run on (taskset, a container's
    cpuset): DuckDB counts the machine's cores, and a process pinned to 2 of 16 ran 16
    threads on them. A count its user set is left alone."""
    import os
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return
    threads = scalar(con, "SELECT current_setting('threads')")
    if 0 < usable < threads and threads == default_setting("threads"):
        con.execute(f"SET threads = {usable}")


def asof_by_sort(con):
    """Plan every ASOF join as DuckDB's sorting join (this connection only: the setting
    is local). DuckDB loops over the right side instead where it estimates the left
    side under asof_loop_join_threshold (64) rows, and after the views' filters its
    estimate can be that low for a million ops: bwd_fwd_ratio with iteration=all on the
    10 GB database made 1.6 G rows in the loop (109 s; 50 s sorted)."""
    con.execute("SET asof_loop_join_threshold = 0")


# glibc's malloc, where the process has it (Linux): DuckDB allocates through its own
# jemalloc, but the Arrow tables it hands to Python (a trace's staged batches,
# ~130 MB each) are malloc'ed, and glibc keeps the pages of freed ones in its arenas
# for the process's life: 250-400 MB of a trace's ingest on 16 DuckDB threads, held
# through the derivation beside DuckDB's full memory cap (docs/benchmarks.md).
_LIBC = None


def trim_heap():
    """Hand the free pages of glibc's heap back to the OS (malloc_trim): a no-op where
    the C library is not glibc."""
    global _LIBC
    if _LIBC is None:
        import ctypes
        import ctypes.util
        try:
            # glibc's own name first: find_library runs ldconfig in a child process, a
            # fork of the whole ingest (1.1 GB) in the middle of its first insert
            try:
                libc = ctypes.CDLL("libc.so.6")
            except OSError:
                libc = ctypes.CDLL(ctypes.util.find_library("c"))
            _LIBC = libc.malloc_trim
            _LIBC.argtypes, _LIBC.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError, TypeError):
            _LIBC = False
    if _LIBC:
        _LIBC(0)
