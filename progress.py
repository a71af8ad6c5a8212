"""Progress of long work on a terminal, one place for every command: a spinner with a
message, a byte bar (one big file), a file bar (many files), a count line (datasets).
Each is silent when stderr is not a terminal, so pipes and logs stay clean."""
import atexit
import os
import sys
import threading
import time
from contextlib import contextmanager

# Phases of long work (an ingest's pieces, parse, insert, derivation, commit), timed when
# TRACEDB_PROFILE is set: name -> [wall s, CPU s of the whole process (every thread), times].
_PHASES = {}
# The phases open now, innermost last (a sampler of memory reads which phase it is in;
# those of several threads interleave). _TIMING: both are changed by the threads of
# files loaded at once.
OPEN = []
_TIMING = threading.Lock()


def profiling():
    return bool(os.environ.get("TRACEDB_PROFILE"))


@contextmanager
def phase(name):
    """Time the block as phase `name` (wall and the process's CPU, all threads) when
    TRACEDB_PROFILE is set; printed to stderr at exit (or taken by phase_times)."""
    if not profiling():
        yield
        return
    if not _PHASES:
        atexit.register(_print_phases)
    w, c = time.perf_counter(), time.process_time()
    with _TIMING:
        OPEN.append(name)
    try:
        yield
    finally:
        dw, dc = time.perf_counter() - w, time.process_time() - c
        with _TIMING:
            del OPEN[len(OPEN) - 1 - OPEN[::-1].index(name)]     # this phase, not another thread's last
            p = _PHASES.setdefault(name, [0.0, 0.0, 0])
            p[0] += dw
            p[1] += dc
            p[2] += 1


def phase_times(reset=True):
    """{phase: (wall s, CPU s, times)} so far, in the order first entered."""
    out = {k: tuple(v) for k, v in _PHASES.items()}
    if reset:
        _PHASES.clear()
    return out


def _print_phases():
    if _PHASES:
        print(f"{'phase':44} {'wall s':>8} {'cpu s':>8} {'cores':>6} {'n':>4}", file=sys.stderr)
        for k, (w, c, n) in phase_times().items():
            print(f"{k[:44]:44} {w:8.3f} {c:8.3f} {c / w if w else 0:6.1f} {n:4d}", file=sys.stderr)


def _on_terminal():
    return sys.stderr.isatty()


# File bars on screen (file_bar): while one is, status and byte_bar show nothing (the
# files loaded at once, each on a thread, would each draw their own over it).
_FILE_BARS = [0]


@contextmanager
def status(message):
    """A spinner with a message on a terminal, nothing otherwise."""
    if not _on_terminal() or _FILE_BARS[0]:
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(message):
        yield


@contextmanager
def byte_bar(path, total):
    """A byte progress bar over one file on a terminal (64 MB and more), nothing
    otherwise. Yields at(position)."""
    if not _on_terminal() or total < (64 << 20) or _FILE_BARS[0]:
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), transient=True) as bar:
        task = bar.add_task(os.path.basename(str(path)), total=total)
        yield lambda n: bar.update(task, completed=n)


@contextmanager
def file_bar(total_files):
    """Files done, MB and events per second on a terminal; nothing otherwise. Yields
    step(nbytes, nevents), called once a file."""
    if not _on_terminal():
        yield lambda *a: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task("ingest", total=total_files, rate="")
        seen = {"bytes": 0, "events": 0}
        t0 = bar.get_time()
        _FILE_BARS[0] += 1

        def step(nbytes, nevents):
            seen["bytes"] += nbytes
            seen["events"] += nevents
            dt = max(bar.get_time() - t0, 1e-9)
            bar.update(task, advance=1, rate=f"{seen['bytes'] / dt / 1e6:.0f} MB/s, "
                                             f"{seen['events'] / dt / 1e3:.0f} k events/s")
        try:
            yield step
        finally:
            _FILE_BARS[0] -= 1


class Progress:
    """One line rewritten in place: `label: done/total what`, then a summary."""

    def __init__(self, label, total=None, enabled=None):
        self.label, self.total, self.t0 = label, total, time.monotonic()
        self.enabled = _on_terminal() if enabled is None else enabled
        self.width = 0

    def update(self, done, what=""):
        if not self.enabled:
            return
        of = f"/{self.total}" if self.total else ""
        line = f"{self.label}: {done}{of}{' ' + what if what else ''}"
        print("\r" + line.ljust(self.width), end="", file=sys.stderr, flush=True)
        self.width = len(line)

    def done(self, summary=""):
        if self.enabled:
            line = f"{self.label}: {summary} in {time.monotonic() - self.t0:.1f} s"
            print("\r" + line.ljust(self.width), file=sys.stderr, flush=True)
