"""Run names: the default one of a file, and what a name may not be (it becomes a
file name in the lake: _runs/NAME.json, run=NAME/)."""
import os
import re


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
