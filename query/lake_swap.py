"""A lake export that is idempotent and atomic per run (issue 55).

`lake.export` writes everything into a staging folder inside the lake
(`_staging-<pid>-<random>/`: a name starting with `_` is no dataset, and readers
and the manifest skip it), then swaps it in: for each exported run, what any
earlier export wrote for it (under any rank, in every dataset) is moved out and
the new partitions renamed in; the datasets without a run column are replaced
file by file (os.replace). The writing (all of the time) changes nothing in the
lake: an export killed then leaves the lake as it was, and the next export
removes the staging folder it left (its process gone). The swap itself is
renames only.
"""
import os
import shutil
import uuid
from pathlib import Path

PREFIX = "_staging-"


def staging(lake):
    """A new staging folder in the lake, after removing those of exports that died."""
    lake = Path(lake)
    for old in lake.glob(PREFIX + "*"):
        pid = old.name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    d = lake / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    d.mkdir()
    return d


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def swap_in(stage, lake):
    """Move what stage holds into lake (see the module's docstring), then remove stage."""
    stage, lake = Path(stage), Path(lake)
    runs = sorted(p.name for p in (stage / "runs").iterdir()) if (stage / "runs").is_dir() else []
    trash = stage / "_replaced"
    trash.mkdir()
    # 1. what earlier exports wrote for these runs, in every dataset, under any rank
    for ds in [p for p in lake.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]:
        for part in runs:
            places = [ds] + [r for r in ds.iterdir() if r.is_dir() and r.name.startswith("rank=")]
            for i, old in enumerate(p / part for p in places if (p / part).is_dir()):    # no glob: [ ] * in names
                os.rename(old, trash / f"{ds.name}-{i}-{len(os.listdir(trash))}")
    # 2. the new partitions, and the datasets without runs, file by file
    for ds in [p for p in stage.iterdir() if p.is_dir() and not p.name.startswith("_")]:
        for src in sorted(ds.rglob("*")):
            rel = src.relative_to(ds)
            dest = lake / ds.name / rel
            if src.is_dir() and rel.parts[-1].startswith("run="):
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.rename(src, dest)
            elif src.is_file() and not any(p.startswith("run=") for p in rel.parts):
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dest)
    if (stage / "_runs").is_dir():
        (lake / "_runs").mkdir(exist_ok=True)
        for rec in (stage / "_runs").iterdir():
            os.replace(rec, lake / "_runs" / rec.name)
    shutil.rmtree(stage, ignore_errors=True)
