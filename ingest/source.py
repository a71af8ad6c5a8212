"""Reading a source file as bytes: gzip by its magic number, hashing, progress."""
import gzip
import os
import sys
import zlib
from contextlib import contextmanager

from tracedb.ingest.errors import IngestError

CHUNK = 8 << 20
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path):
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_bytes(path):
    """A binary stream of the file's content, decompressed when it is gzip.

    `.raw_tell()` on the result gives the position in the file on disk (progress).
    """
    if is_gzip(path):
        f = gzip.open(path, "rb")
        f.raw_tell = f.fileobj.tell
    else:
        f = open(path, "rb")
        f.raw_tell = f.tell
    return f


def hash_file(path):
    """(sha256 hex digest, size) of the file's decompressed content, read in chunks."""
    import hashlib
    h, size = hashlib.sha256(), 0
    with open_bytes(path) as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def head(path, n=1 << 16):
    """The first n bytes of the decompressed content (for sniffing)."""
    try:
        with open_bytes(path) as f:
            return f.read(n)
    except (OSError, EOFError, zlib.error) as e:
        raise IngestError(path, f"cannot read ({e})") from None


@contextmanager
def progress(path, total):
    """A byte progress bar on a terminal, nothing otherwise. Yields at(position)."""
    if not sys.stderr.isatty() or total < (64 << 20):
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), transient=True) as bar:
        task = bar.add_task(os.path.basename(str(path)), total=total)
        yield lambda n: bar.update(task, completed=n)


@contextmanager
def status(message):
    """A spinner with a message on a terminal, nothing otherwise."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(message):
        yield
