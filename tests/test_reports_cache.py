"""The saved reports' cache (query/reports.all_reports) follows the queries folder: a
report file added, edited or removed while the process lives (a notebook) is seen at the
next call, and an unchanged folder is not parsed again."""
import os
import shutil
import types
from importlib import resources
from pathlib import Path

from tracedb.query import reports
from tracedb.store import catalog


def _folder(tmp_path, monkeypatch):
    """A queries folder of two real reports, read in place of the package's."""
    real = resources.files("tracedb.queries")
    d = tmp_path / "queries"
    d.mkdir()
    for name in ("top_kernels.sql", "idle_breakdown.sql"):
        shutil.copy(real / name, d / name)
    monkeypatch.setattr(catalog, "resources", types.SimpleNamespace(
        files=lambda pkg: d if pkg == "tracedb.queries" else resources.files(pkg)))
    return d


def _touch_later(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_a_report_added_edited_and_removed_is_seen(tmp_path, monkeypatch):
    d = _folder(tmp_path, monkeypatch)
    parsed = []
    real_parse = reports.parse
    monkeypatch.setattr(reports, "parse", lambda text, name: parsed.append(name) or real_parse(text, name))
    assert set(reports.all_reports()) == {"top_kernels", "idle_breakdown"}
    reports.all_reports()
    assert len(parsed) == 2       # (parsed once, not at every call)

    text = (d / "top_kernels.sql").read_text()
    (d / "my_kernels.sql").write_text(text.replace("-- name: top_kernels", "-- name: my_kernels"))
    assert set(reports.all_reports()) == {"top_kernels", "idle_breakdown", "my_kernels"}
    assert not reports.get("my_kernels").problems

    (d / "my_kernels.sql").write_text(text.replace("-- name: top_kernels", "-- name: my_kernels")
                                      .replace("Kernels by total time", "Mine by total time"))
    _touch_later(d / "my_kernels.sql")     # (a file system's coarse clock: the edit shows in its size too)
    assert reports.get("my_kernels").description.startswith("Mine by total time")
    assert reports.get("top_kernels").description.startswith("Kernels by total time")

    (d / "my_kernels.sql").unlink()
    assert set(reports.all_reports()) == {"top_kernels", "idle_breakdown"}
    before = len(parsed)
    reports.all_reports()
    assert len(parsed) == before        # unchanged folder: the cache
