"""Names from users and from files that become paths: checked once, against every
place they become one (issue 55).

A run name is a file and a folder name in a lake (`_runs/NAME.json`,
`DATASET/rank=R/run=NAME/`, percent-encoded: lake.run_file_name), a job name the
prefix of its runs' names, a capture's run the prefix of its files in the capture
folder. A file named in a capture manifest is a plain file name inside that folder.
"""
import os
from urllib.parse import quote

NAME_BYTES_MAX = 255         # a file name on Linux, macOS and Windows file systems


def path_name_problem(name, what="--run"):
    """Why a run (or job) name cannot be one: None when it can. Checks what
    check_run_name checks (no separator, control character or leading dot; at most
    200 characters) and that its percent-encoded form fits a file name in the lake
    (a 44-character CJK name is 396 bytes there)."""
    from tracedb.ingest import check_run_name
    if why := check_run_name(name, what):
        return why
    encoded = quote(str(name), safe="")
    longest = max(len("run=" + encoded), len(encoded) + len(".json"))
    if longest > NAME_BYTES_MAX:
        return (f"{what} {str(name)[:24]!r}...: too long for a path (its lake file name would be {longest} bytes, "
                f"at most {NAME_BYTES_MAX}): give a shorter name")
    return None


def inside(folder, name, what):
    """folder/name where name (from a file: a capture manifest) is a plain file name
    that stays in folder, also through links; else ValueError naming it."""
    if not isinstance(name, str) or not name or name in (".", "..") or os.path.basename(name) != name \
            or "\\" in name or "\x00" in name:
        raise ValueError(f"{what} {name!r} is not a file name inside the folder (no path, no '..')")
    path = os.path.join(folder, name)
    real, root = os.path.realpath(path), os.path.realpath(folder)
    if os.path.lexists(path) and os.path.commonpath([real, root]) != root:
        raise ValueError(f"{what} {name!r} is a link out of the folder (to {real})")
    return path
