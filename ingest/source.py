"""Reading a source file as bytes: gzip and xz by their magic numbers, hashing.

A compressed stream that ends early or is corrupt is not an exception here: the
reader returns the content it could decompress and records why it stopped in
`.problem`, so the format's reader can decide (a gzip without only its trailer
holds the whole content; a trace cut off in its middle does not).
"""
import io
import lzma
import os
import stat
import zlib

from .errors import IngestError

CHUNK = 8 << 20
# A compressed file's content is refused once it is past INFLATE_MIN bytes and more
# than INFLATE_RATIO times the compressed bytes read (real traces and ncu exports:
# 15-46x; 6 GiB of blanks in a 6 MB gzip is 1000x), before it fills the disk.
INFLATE_MIN = 256 << 20
INFLATE_RATIO = int(os.environ.get("TRACEDB_MAX_INFLATION", "250"))
GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"


def check_readable(path):
    """IngestError unless path is a regular file this process can open (no hang on a
    FIFO, a symlink loop named as such)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise IngestError(path, (e.strerror or str(e)).lower()) from None
    if stat.S_ISDIR(st.st_mode):
        raise IngestError(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        what = "a pipe" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise IngestError(path, f"is {what}, not a regular file: tracedb reads its input more than once; "
                                "save it to a file first (e.g. zcat t.json.gz > t.json)")
    if not os.access(path, os.R_OK):
        raise IngestError(path, "permission denied")
    return st


def compression(path):
    """'gzip' | 'xz' | None, from the first bytes (IngestError for what is no regular
    file: opening a FIFO with no writer would wait for ever)."""
    check_readable(path)
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic[:2] == GZIP_MAGIC:
        return "gzip"
    if magic == XZ_MAGIC:
        return "xz"
    return None


def is_gzip(path):
    return compression(path) == "gzip"


class _Decompressing(io.RawIOBase):
    """A raw stream of a gzip (every member) or xz file's decompressed content.

    Where the compressed data ends early or is corrupt, the content before that
    point is returned, then end of file; `.problem` says what happened.

    gzip is inflated by pyarrow (2.4x Python's zlib: 1.2 s against 2.9 s for a
    1 GB trace) while it can; where it stops with an error (a cut-off or corrupt
    stream, padding after the last member), zlib takes over from the same byte of
    content, so `.problem` is zlib's and so is the content (of a corrupt stream,
    the garbage decoded before the error shows may be longer: pyarrow reads 4 MiB
    at a time)."""

    def __init__(self, path, kind):
        self.path = str(path)
        self.fileobj = open(path, "rb")
        self.kind = kind
        self.problem = None
        self._new()
        self._pending, self._at = b"", 0
        self._done = False
        self._delivered = 0                  # bytes of content returned so far
        self._arrow = self._arrow_src = None
        if kind == "gzip":
            import pyarrow as pa
            try:
                self._arrow_src = pa.OSFile(str(path))
                self._arrow = pa.CompressedInputStream(self._arrow_src, "gzip")
            except BaseException:
                if self._arrow_src is not None:
                    self._arrow_src.close()
                self.fileobj.close()
                raise

    def _new(self):
        self._d = zlib.decompressobj(31) if self.kind == "gzip" else lzma.LZMADecompressor()

    def readable(self):
        return True

    def raw_tell(self):
        """Position in the compressed file (progress)."""
        return self._arrow_src.tell() if self._arrow is not None else self.fileobj.tell()

    def _fill_arrow(self):
        try:
            data = self._arrow.read_buffer(1 << 22)      # pyarrow's buffer itself, not a copy as bytes
        except OSError:                      # pyarrow's errors are OSError (ArrowIOError)
            self._close_arrow()
            skip = self._delivered           # zlib from the start, up to where pyarrow was
            while skip and not self._done:
                self._fill_zlib()
                n = min(skip, len(self._pending))
                self._pending, skip = self._pending[n:], skip - n
            return
        if not len(data):
            self._close_arrow()
            self._done = True
            return
        self._pending, self._at = data, 0

    def _close_arrow(self):
        self._arrow.close()
        self._arrow_src.close()
        self._arrow = None

    def _fill(self):
        while self._at >= len(self._pending) and not self._done:
            if self._arrow is not None:
                self._fill_arrow()
            else:
                self._fill_zlib()

    def _fill_zlib(self):
        self._pending, self._at = b"", 0
        data = self.fileobj.read(1 << 20)
        if not data:
            if not self._d.eof:
                self.problem = f"the {self.kind} stream is cut off (no end-of-stream marker)"
            self._done = True
            return
        try:
            while data:
                out = self._d.decompress(data)
                self._pending += out
                if self._d.eof:
                    data = self._d.unused_data
                    if self.kind == "gzip" and data.lstrip(b"\x00") == b"":
                        data = b""            # padding after the last member
                    elif data:
                        self._new()           # another member
                else:
                    data = b""
        except (zlib.error, lzma.LZMAError) as e:
            self.problem = f"the {self.kind} stream is corrupt ({e})"
            self._done = True

    def readinto(self, b):
        self._fill()
        n = min(len(b), len(self._pending) - self._at)
        b[:n] = memoryview(self._pending).cast("B")[self._at:self._at + n]     # (a pyarrow buffer is signed chars)
        self._at += n
        self._delivered += n
        if self._delivered > INFLATE_MIN and self._delivered > INFLATE_RATIO * max(1, self.raw_tell()):
            raise IngestError(self.path, f"its {self.kind} content inflates more than {INFLATE_RATIO}x "
                                         f"({self._delivered >> 20} MiB from {self.raw_tell() >> 10} KiB read): "
                                         "not a profile (a compression bomb?); set TRACEDB_MAX_INFLATION=N to "
                                         "allow N times")
        return n

    def close(self):
        if self._arrow is not None:
            self._close_arrow()
        self.fileobj.close()
        super().close()


def open_bytes(path):
    """A binary stream of the file's content, decompressed when it is gzip or xz.

    `.raw_tell()` gives the position in the file on disk (progress); `.problem`
    (compressed files) why the content ended early, else None.
    """
    kind = compression(path)
    if kind:
        raw = _Decompressing(path, kind)
        f = io.BufferedReader(raw, CHUNK)
        f.raw_tell = raw.raw_tell
        f.fileobj = raw.fileobj
        f.decompressor = raw
        return f
    f = open(path, "rb")
    f.raw_tell = f.tell
    return f


def problem(f):
    """Why a stream from open_bytes ended early (None: it did not)."""
    d = getattr(f, "decompressor", None)
    return d.problem if d is not None else None


def hash_file(path):
    """(sha256 hex digest, size) of the file's decompressed content, read in chunks."""
    import hashlib
    h, size = hashlib.sha256(), 0
    with open_bytes(path) as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
        why = problem(f)
    if why:
        raise IngestError(path, why)
    return h.hexdigest(), size


def plain_copy(path, work):
    """(path of the content as an uncompressed file, sha256 hex, size, whether it ends
    with a newline): a compressed file is decompressed into work (DuckDB's CSV
    reader knows no xz), a plain one is only read."""
    import hashlib
    h, size, last = hashlib.sha256(), 0, b"\n"
    kind = compression(path)
    out_path = os.path.join(work, "content.plain") if kind else str(path)
    with open_bytes(path) as f, (open(out_path, "wb") if kind else open(os.devnull, "wb")) as out:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
            last = chunk[-1:]
            if kind:
                out.write(chunk)
        why = problem(f)
    if why:
        raise IngestError(path, why)
    return out_path, h.hexdigest(), size, last == b"\n"


def head(path, n=1 << 16):
    """The first n bytes of the decompressed content (for sniffing)."""
    try:
        with open_bytes(path) as f:
            data = f.read(n)
            why = problem(f)
    except OSError as e:
        raise IngestError(path, f"cannot read ({e.strerror or e})") from None
    if why and not data:
        raise IngestError(path, why)
    return data
