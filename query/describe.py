"""`tracedb reports NAME`: a report's whole header as a pip user reads it: what it
answers, its parameters (type, allowed values, default), its columns (type, unit),
what it needs, its engines, and where the method document is installed."""
import re
import textwrap
from importlib import resources



def method_path():
    """The installed method document (docs/method.md ships inside the package)."""
    return resources.files("tracedb").joinpath("docs", "method.md")


TOPICS = ("single GPU", "critical path", "ncu levels", "energy", "FLOPs", "distributed", "system", "TF queue")


def first_sentence(text):
    """The description's first sentence (up to its first '. ', or the whole text)."""
    text = " ".join(text.split())
    m = re.search(r"(?<=[.:])\s+(?=[A-Z`(])", text)
    return text[:m.start()].rstrip(":") if m else text


def listing(all_reports, width=100):
    """`tracedb reports`: the reports grouped by their header's topic, one line each
    (name and first sentence, cut at a word to the width)."""
    groups = {}
    for r in all_reports:
        groups.setdefault(r.topic or "other", []).append(r)
    names = max((len(r.name) for g in groups.values() for r in g), default=0)
    out = []
    for topic in [t for t in TOPICS if t in groups] + sorted(set(groups) - set(TOPICS)):
        out.append(f"{topic}:")
        for r in sorted(groups[topic], key=lambda r: r.name):
            line = f"  {r.name:<{names}}  {first_sentence(r.description)}"
            if len(line) > width:
                line = line[:width - 1].rsplit(" ", 1)[0] + "…"
            out.append(line)
    out.append("tracedb reports NAME: a report's parameters and columns")
    return "\n".join(out) + "\n"


def describe(report, width=100):
    """The header of `report` as text."""
    wrap = lambda text, indent: textwrap.fill(text, width, initial_indent=indent,
                                              subsequent_indent=indent + "  ")
    out = [report.name + (f" ({report.topic})" if report.topic else ""), wrap(report.description, "  "), ""]
    out.append("parameters:" if report.params else "parameters: none")
    for p in report.params:
        default = "NULL" if p.default is None else repr(p.default) if isinstance(p.default, str) else p.default
        allowed = f" one of {' | '.join(p.choices)};" if p.choices else ""
        floor = f" {p.floor}" if p.floor else ""
        out.append(wrap(f"{p.name} {p.type}{floor} (default {default};{allowed} --param {p.name}=...): {p.doc}", "  "))
    out.append("columns:")
    for name, type_, doc in report.columns:
        out.append(wrap(f"{name} {type_}: {doc}", "  "))
    if report.requires:
        out.append("requires:")
        for rel, meaning in report.requires:
            out.append(wrap(f"{rel}: {meaning}", "  "))
    out.append(f"engines: {', '.join(report.engines)}")
    cited = re.search(r"(?i)method(\.md)?\s+sections?", report.description)
    out.append(f"method: {method_path()}" + (" (the sections cited above)" if cited else ""))
    return "\n".join(out)
