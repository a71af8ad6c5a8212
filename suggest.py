"""\"Did you mean\" for names a user types: reports, parameters, runs, charts."""
import difflib


def did_you_mean(name, choices, n=1):
    """` (did you mean X?)` for the closest of choices to name (difflib), or ''."""
    if not isinstance(name, str):
        return ""
    choices = [c for c in choices if isinstance(c, str)]
    close = difflib.get_close_matches(name, choices, n=n, cutoff=0.6)
    if not close:       # a prefix or a part of the name (`gpu_util` for gpu_utilization)
        close = [c for c in choices if name and (c.startswith(name) or name in c)][:n]
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def run_hint(con, name):
    """did_you_mean over the runs of the database."""
    try:
        runs = [r[0] for r in con.execute("SELECT run FROM runs").fetchall()]
    except Exception:           # a database without the runs table: no hint
        return ""
    return did_you_mean(name, runs)
