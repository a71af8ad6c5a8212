"""`tracedb reports NAME`: a report's whole header as a pip user reads it: what it
answers, its parameters (type, allowed values, default), its columns (type, unit),
what it needs, its engines, and where the method document is installed."""
import re
import textwrap
from importlib import resources



def method_path():
    """The installed method document (docs/method.md ships inside the package)."""
    return resources.files("tracedb").joinpath("docs", "method.md")


def describe(report, width=100):
    """The header of `report` as text."""
    wrap = lambda text, indent: textwrap.fill(text, width, initial_indent=indent,
                                              subsequent_indent=indent + "  ")
    out = [report.name, wrap(report.description, "  "), ""]
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
