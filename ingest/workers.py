"""Worker processes, one pool for the package: a lake's files (query/lake.py), an nsys
export's rowid ranges (nsys.py). (A directory's traces load on threads of one process,
into one database: parallel.py.)"""
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed


def usable_cores():
    """The cores this process may run on (taskset, a cpuset), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def spawnable():
    """False where a spawned worker would fail to start: the main script is no file it
    can load again (python - < script: '<stdin>'). Callers then work in this process."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return path is None or os.path.exists(path)


def each_in_workers(fn, items, jobs, ordered=False, ahead=None):
    """fn(item) for each item, in `jobs` worker processes (in this one for a single
    job): the results as they finish, or in the items' order. With ahead, in order, at
    most `ahead` items a worker under way or waiting to be taken (a stream of big
    results stays bounded in memory). Spawned, not forked: the parent holds DuckDB (or
    JVM) threads that a fork would copy mid-flight. fn must be a module's function, or
    a functools.partial of one (the workers import it)."""
    if jobs <= 1:
        yield from map(fn, items)
        return
    import multiprocessing
    from collections import deque
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        if ahead is not None:
            pending, todo = deque(), iter(items)
            try:
                while True:
                    while len(pending) < jobs * ahead and (item := next(todo, None)) is not None:
                        pending.append(pool.submit(fn, item))
                    if not pending:
                        return
                    yield pending.popleft().result()
            finally:
                for fut in pending:
                    fut.cancel()
        elif ordered:
            yield from pool.map(fn, items)
        else:
            for fut in as_completed([pool.submit(fn, it) for it in items]):
                yield fut.result()
