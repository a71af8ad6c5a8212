"""New database files as copies of one made once.

Applying the schema to a new file takes about 0.4 s (some 170 statements, each view
bound as it is made); a copy takes a few ms. The template is made once per schema,
tracedb code, DuckDB version and storage format (template_key), in the user's cache,
and db.connect drops a copy that does not open, with its template, and builds the
file instead. Every copy carries the template's database identifier, which DuckDB
checks to tell that a WAL belongs to its file: so no copy is made where a WAL of an
earlier file of that name is left (DuckDB would replay it into the copy).
"""
import glob
import hashlib
import os
import re
import shutil
import tempfile
import time
from importlib import resources

import duckdb

from . import catalog
from .files import remove

UNUSED_DAYS = 30        # templates of other versions not used for this long are removed


def template_dir():
    """$TRACEDB_CACHE_DIR (empty: no templates), else the user's cache, as cuda_bench's
    builds; None where there is no home to put it in."""
    d = os.environ.get("TRACEDB_CACHE_DIR")
    if d is not None:
        return d or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return None if base.startswith("~") else os.path.join(base, "tracedb", "schema")


def template_key():
    """What a new database's bytes depend on: the schema's files, the code that applies
    them, DuckDB's version and the storage format. Any change names another template."""
    h = hashlib.sha256(f"{duckdb.__version__}\0{catalog.STORAGE_COMPATIBILITY}\0{catalog.SCHEMA_VERSION}\0".encode())
    for folder in ("tables", "seeds", "views"):
        for name in catalog.sql_files("schema", folder):
            h.update(name.encode() + b"\0" + catalog.sql_text("schema", name).encode())
    for module in ("db.py", "template.py", "catalog.py"):
        h.update(resources.files("tracedb.store").joinpath(module).read_bytes())
    return h.hexdigest()[:20]


def _plain_file(path):
    """A local file path as DuckDB takes it: not ':memory:', ':memory:name', 'md:x' or
    's3://x' (a Windows drive letter is one character)."""
    return not re.match(r"(:|[A-Za-z][A-Za-z0-9+.-]+:)", path)


def copy_into(path, build):
    """Write a copy of the template at path, a file that does not exist yet; the
    template's path, or None (nothing written) where templates are off, the cache
    cannot be made or written, a WAL of that name is left, or path appeared meanwhile.
    The copy is written beside path and linked in: no process opens half a copy.
    build(file) makes a new database at file (db.connect's own, without a template)."""
    where = template_dir()
    if not where or not _plain_file(path) or os.path.exists(path + ".wal"):
        return None
    tmp = None
    try:
        template = os.path.join(where, f"empty-{template_key()}.duckdb")
        if not os.path.exists(template):
            _make(where, template, build)
        else:
            os.utime(template)              # in use: not pruned
        tmp = f"{os.path.abspath(path)}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)     # the umask's mode, as DuckDB's own
        with open(template, "rb") as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.link(tmp, path)           # fails where path exists: never over another's file
        return template
    except (OSError, duckdb.Error):
        return None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _make(where, template, build):
    """Build the template (build: db.connect of a new file, no copy), flushed to disk before it
    takes its name: concurrent makers write the same bytes, and the rename is atomic."""
    os.makedirs(where, exist_ok=True)
    fd, made = tempfile.mkstemp(suffix=".duckdb", dir=where)
    os.close(fd)
    os.unlink(made)        # DuckDB makes the file itself
    try:
        build(made)
        with open(made, "rb") as f:
            os.fsync(f.fileno())
        os.replace(made, template)
    finally:
        remove(made)
    _prune(where, template)


def _prune(where, keep):
    """Remove the templates of other versions that no copy used for UNUSED_DAYS."""
    old = time.time() - UNUSED_DAYS * 86400
    for f in glob.glob(os.path.join(where, "empty-*.duckdb")):
        try:
            if f != keep and os.path.getmtime(f) < old:
                os.unlink(f)
        except OSError:
            pass


def discard(path, template):
    """A copy that did not open: remove it (and any WAL its open began) and the
    template it came from, so the next new file builds a sound one."""
    for f in (path, path + ".wal", template):
        try:
            os.unlink(f)
        except OSError:
            pass
