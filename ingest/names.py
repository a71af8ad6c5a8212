"""Names from users and from files that become paths: a run's default name, and what
a name may not be, checked once against every place it becomes a path. A run name is
a file and a folder name in a lake (`_runs/NAME.json`, `DATASET/rank=R/run=NAME/`,
percent-encoded: lake.run_file_name), a job name the prefix of its runs' names, a
capture's run the prefix of its files in the capture folder. A file named in a
capture manifest is a plain file name inside that folder."""
import os
import re
from urllib.parse import quote


def run_name_for(path):
    """Default run name: the file name without its trace/compression suffixes
    (characters a run name may not hold become '_')."""
    name = os.path.basename(str(path))
    name = re.sub(r"(\.gz|\.xz)$", "", name)
    name = re.sub(r"(\.pt\.trace)?\.(json|csv|txt|log)$", "", name)
    name = _BAD_RUN_CHARS.sub("_", name).lstrip(".")
    return name or "run"


# A run name becomes a file name in the lake (_runs/NAME.json, run=NAME/): no path
# separators, control characters or leading dot; at most 200 characters.
_BAD_RUN_CHARS = re.compile(r"[/\\\x00-\x1f\x7f]")
RUN_NAME_MAX = 200


def check_run_name(name, what="--run"):
    """The reason a run name is refused, or None."""
    if not name or not name.strip():
        return f"{what} {name!r}: a run name cannot be empty"
    if _BAD_RUN_CHARS.search(name):
        return f"{what} {name!r}: a run name cannot hold '/', '\\' or control characters"
    if name.startswith("."):
        return f"{what} {name!r}: a run name cannot start with '.'"
    if len(name) > RUN_NAME_MAX:
        return f"{what}: a run name is at most {RUN_NAME_MAX} characters"
    return None


NAME_BYTES_MAX = 255         # a file name on Linux, macOS and Windows file systems


def path_name_problem(name, what="--run"):
    """Why a run (or job) name cannot be one: None when it can. Checks what
    check_run_name checks (no separator, control character or leading dot; at most
    200 characters) and that its percent-encoded form fits a file name in the lake
    (a 44-character CJK name is 396 bytes there)."""
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
