"""Progress of long work on a terminal, one place for every command: a spinner with a
message, a byte bar (one big file), a file bar (many files), a count line (datasets).
Each is silent when stderr is not a terminal, so pipes and logs stay clean."""
import os
import sys
import time
from contextlib import contextmanager


def _on_terminal():
    return sys.stderr.isatty()


@contextmanager
def status(message):
    """A spinner with a message on a terminal, nothing otherwise."""
    if not _on_terminal():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(message):
        yield


@contextmanager
def byte_bar(path, total):
    """A byte progress bar over one file on a terminal (64 MB and more), nothing
    otherwise. Yields at(position)."""
    if not _on_terminal() or total < (64 << 20):
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

        def step(nbytes, nevents):
            seen["bytes"] += nbytes
            seen["events"] += nevents
            dt = max(bar.get_time() - t0, 1e-9)
            bar.update(task, advance=1, rate=f"{seen['bytes'] / dt / 1e6:.0f} MB/s, "
                                             f"{seen['events'] / dt / 1e3:.0f} k events/s")
        yield step


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
