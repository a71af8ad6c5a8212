"""What every reader of an input format is (class Reader), carrying every fact about
its kind: `sniff` recognizes a file from its name and first bytes and names its
format; `prepare` parses it into temp tables and returns a Prepared (format, size,
content digest); `load` writes the run inside the caller's transaction; `noun` and
`summary` say what was loaded; and a reader whose runs pair with a trace run (ncu
reports, power and host logs) says how: `pair` links the run in the same
transaction, `candidates` finds the traces that could own it (autopairing),
`unpair` undoes the link (`tracedb rm --pairing`), `paired_note` what to say when a
trace has several. The registry (registry.py) lists the readers.
"""
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

from ..store.sql import rows
from .names import run_name_for


@dataclass
class Prepared:
    """A parsed file waiting (in temp tables, or as pieces on disk) for its run name."""
    format: str                      # source format, kept as runs.metadata.source_format
    content_bytes: int               # size of the decompressed content
    digest: Callable[[], str]        # sha256 hex of the content (may wait for a hashing thread)
    digest_ready: bool = True        # False: the hash is still computing (no run of this size exists)
    state: object = None             # what the reader's load needs
    notes: list = field(default_factory=list)


class Reader:
    kind = None            # runs.kind of what it loads
    pairs = False          # it can pair its run with a trace run (--pair-with)
    noun = "events"        # what runs.n_events counts, for the ingest log
    pairing_tables = ()    # tables whose rows link a run of this kind to its trace (pairing_column names it)
    pairing_column = None

    def sniff(self, path, text):
        """The format name when this reader reads the file, else None. text() gives
        the first 64 KiB of the decompressed content as text (read on first call)."""
        raise NotImplementedError

    def run_name(self, path):
        return run_name_for(path)

    def prepare(self, con, path, fmt, work, options):
        raise NotImplementedError

    def loading(self, con, prep):
        """A context around the load's transaction (settings to restore after a rollback)."""
        return nullcontext()

    def load(self, con, prep, run):
        """Write the run (the caller owns the transaction and registers it); returns
        the runs row's fields. May raise Reload: the caller rolls back, calls
        reload(prep) and loads again."""
        raise NotImplementedError

    def reload(self, prep, work):
        raise NotImplementedError

    def summary(self, con, run):
        """One line on what the run holds, for `loaded PATH as run RUN (...)`."""
        n = rows(con, "SELECT n_events FROM runs WHERE run = ?", [run])
        return f"{self.kind}: {(n[0][0] if n else 0) or 0} {self.noun}"

    def notes(self, con, path, run):
        """Lines on what the run lacks that the reports need (none by default)."""
        return []

    def pair(self, con, run, trace_run, options):
        """Pair the run with trace_run (same transaction); returns what to tell the user."""
        raise NotImplementedError

    def candidates(self, con, run, pool):
        """(trace runs of pool that could own the run, why) for autopairing."""
        return [], "not a kind that pairs"

    def paired_traces(self, con, run):
        """The trace runs the run is paired with (an ncu report matched with two traces has two)."""
        if self.pairing_tables:
            return [r[0] for r in rows(con, f"SELECT DISTINCT trace_run FROM {self.pairing_tables[-1]} "
                                            f"WHERE {self.pairing_column} = ? ORDER BY 1", [run])]
        return [r[0] for r in rows(con, "SELECT paired_run FROM runs WHERE run = ? AND paired_run IS NOT NULL",
                                   [run])]

    def unpair(self, con, run, trace=None):
        """Undo the run's pairing with trace (its only one when None; the caller owns the
        transaction and has checked trace with paired_traces): {table: rows deleted}.
        Exactly the pairing named: a report paired with two traces keeps the other."""
        where = f"{self.pairing_column} = $run" + (" AND trace_run = $trace" if trace is not None else "")
        p = {"run": run, **({"trace": trace} if trace is not None else {})}
        deleted = {}
        for table in self.pairing_tables:
            n = rows(con, f"SELECT count(*) FROM {table} WHERE {where}", p)[0][0]
            if n:
                con.execute(f"DELETE FROM {table} WHERE {where}", p)
                deleted[table] = n
        left = self.paired_traces(con, run) if self.pairing_tables else []
        before = rows(con, "SELECT paired_run FROM runs WHERE run = $run", {"run": run})[0][0]
        after = max(left) if left else None
        if before != after:
            con.execute("UPDATE runs SET paired_run = $left WHERE run = $run", {"run": run, "left": after})
            deleted["link to its trace"] = 1
        return deleted

    def paired_note(self, con, trace):
        """A note when trace now has several runs of this kind paired (which one the reports use)."""
        return None


class Reload(Exception):
    """The fast path of a load cannot read this file: roll back and load again."""


def overlapping_in_time(con, table, run, pool):
    """The trace runs of pool whose absolute time overlaps the samples of `run` in
    `table` (a sampler's log: power, host_samples): the traces it was running beside."""
    found = rows(con, f"""WITH p AS (SELECT min(ts_ns) AS s, max(ts_ns) AS e FROM {table} WHERE run = $run),
                              t AS (SELECT e.run, min(e.ts_ns) AS s, max(e.ts_ns + coalesce(e.dur_ns, 0)) AS e
                                    FROM events e JOIN runs r USING (run)
                                    WHERE e.run IN (SELECT unnest($pool)) AND r.base_time_ns > 0
                                    GROUP BY e.run)
                         SELECT t.run FROM t, p WHERE t.s <= p.e AND p.s <= t.e ORDER BY t.run""",
                 {"run": run, "pool": pool})
    return [r[0] for r in found], "overlapping absolute time"


def first_line(text):
    t = text()
    return t.splitlines()[0] if t else ""
