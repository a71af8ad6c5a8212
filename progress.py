"""Progress of long commands on a terminal (one line rewritten in place on stderr);
silent when stderr is not a terminal, so pipes and logs stay clean."""
import sys
import time


class Progress:
    def __init__(self, label, total=None, enabled=None):
        self.label, self.total, self.t0 = label, total, time.monotonic()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
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
