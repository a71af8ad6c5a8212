"""The warnings of an ingest, caught for that ingest alone, also while several run at
once on threads of one process (ingest/parallel.py).

warnings.catch_warnings swaps the warnings module's global state (its filters, the
function that shows a warning) on entry and puts back what it saw on exit: two of
them on two threads, ended out of order, leave one's recorder installed for good, and
either thread's warnings land in whichever list was installed last. Here one hook is
installed while any ingest is catching (a count, under a lock) and each warning goes
to the ingest of the thread that gave it, else to the ingest whose file it names
("PATH: ..." as every ingest warning begins: a thread of its own, such as a gzip
inflater), else on as it would have gone without any catching: through the caller's
own filters, which the hook's "always" would otherwise have bypassed.
"""
import os
import threading
import warnings
from contextlib import contextmanager

_LOCK = threading.Lock()
_OPEN = []          # (thread id, path, list of warnings) of each ingest catching, in the order begun
_SAVED = None       # (filters, _showwarnmsg_impl, showwarning) before the first one began


def _ignored(msg, filters):
    """Whether the caller's filters ignore msg: the first filter that matches it decides,
    as in warnings.warn_explicit (the module is the file's name, as there when a warning
    comes without one)."""
    module = os.path.splitext(os.path.basename(msg.filename or ""))[0]
    for action, text, category, mod, lineno in filters:
        if ((text is None or text.match(str(msg.message))) and issubclass(msg.category, category)
                and (mod is None or mod.match(module)) and lineno in (0, msg.lineno)):
            return action == "ignore"
    return warnings.defaultaction == "ignore"


def _show_saved(msg, saved):
    """A warning no ingest caught, shown as warnings would have without the hook."""
    filters, impl, show = saved
    if _ignored(msg, filters):
        return
    if show is not warnings._showwarning_orig:      # a caller's own (the CLI's)
        show(msg.message, msg.category, msg.filename, msg.lineno, msg.file, msg.line)
    else:
        impl(msg)


def _route(msg):
    text, me = str(msg.message), threading.get_ident()
    with _LOCK:
        catching = list(_OPEN)
        saved = _SAVED
    for ident, _, log in reversed(catching):          # this thread's ingest
        if ident == me:
            log.append(msg)
            return
    for _, path, log in reversed(catching):           # a warning about a file being ingested
        if text.startswith(path + ": "):
            log.append(msg)
            return
    if saved is not None:
        _show_saved(msg, saved)
    else:                                              # the last catch ended meanwhile
        warnings._showwarnmsg_impl(msg)


@contextmanager
def caught(path):
    """Every warning the block gives (or gives about path, from another thread), in a
    list, each shown only there (the caller gives them on): warnings.catch_warnings
    (record=True) with simplefilter("always"), safe across threads."""
    global _SAVED
    log = []
    entry = (threading.get_ident(), str(path), log)
    with _LOCK:
        if not _OPEN:
            _SAVED = (warnings.filters, warnings._showwarnmsg_impl, warnings.showwarning)
            warnings.filters = warnings.filters[:]
            warnings.simplefilter("always")          # calls _filters_mutated
            warnings._showwarnmsg_impl = _route
            warnings.showwarning = warnings._showwarning_orig
        _OPEN.append(entry)
    try:
        yield log
    finally:
        with _LOCK:
            del _OPEN[next(i for i, e in enumerate(_OPEN) if e is entry)]
            if not _OPEN:
                warnings.filters, warnings._showwarnmsg_impl, warnings.showwarning = _SAVED
                warnings._filters_mutated()
                _SAVED = None
