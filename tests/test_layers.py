"""The package's layers hold: imports point one way, down from the command to the
database (store <- ingest <- query <- analysis <- present <- capture <- api <- cli),
and no module imports itself back through others. Read from the code's own
imports (every one, also those inside functions), so a new upward import or a
circle fails here, not in a reviewer's head."""
import ast
import functools
import os
import re
from pathlib import Path

import pytest

from tracedb.store import catalog

ROOT = Path(__file__).resolve().parent.parent
# A module's layer: its folder (or, at the root, its name). Higher numbers may import lower ones.
LAYERS = {"errors": 0, "progress": 0, "suggest": 0, "store": 1, "ingest": 2, "query": 3, "analysis": 4, "present": 5,
          "capture": 6, "cuda_bench": 6, "api": 7, "__init__": 8, "cli_answers": 9, "argtypes": 9, "cli": 10}
DATA = {"schema", "queries", "rules", "sample"}          # folders of SQL and samples: no code to layer


@functools.cache
def modules():
    """Dotted name (without tracedb.) -> file of every module of the package."""
    out = {}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_")) and d not in ("tests", "benchmarks", "build", "docs")
                   and not d.endswith(".egg-info")]
        for f in files:
            if f.endswith(".py"):
                rel = (Path(folder) / f).relative_to(ROOT)
                out[".".join(rel.with_suffix("").parts)] = Path(folder) / f
    return out


def layer(module):
    top = module.split(".")[0]
    return LAYERS.get(top)


def imports(module, path):
    """The package modules `module` imports (relative imports, resolved; an import of
    a package's name counts as its __init__, of a name in it as the module if one is)."""
    known = modules()
    package = module.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert not (node.module or "").startswith("tracedb"), \
                    f"{module}: absolute import of {node.module}: inside the package imports are relative"
                continue
            base = package[:len(package) - node.level + 1]
            target = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                cand = ".".join(target + [alias.name])
                if cand in known:
                    out.add(cand)
                elif ".".join(target) in known:
                    out.add(".".join(target))
                elif ".".join(target + ["__init__"]) in known:
                    out.add(".".join(target + ["__init__"]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert not alias.name.startswith("tracedb"), f"{module}: `import {alias.name}`: use a relative import"
    out.discard(module)
    return out


@functools.cache
def graph():
    return {m: imports(m, p) for m, p in modules().items()}


def test_every_module_has_a_layer():
    missing = sorted(m for m in modules() if layer(m) is None and m.split(".")[0] not in DATA)
    assert not missing, f"modules in no layer (add their folder to LAYERS and docs/architecture.md): {missing}"


def test_no_import_points_up():
    up = []
    for m, targets in graph().items():
        for t in targets:
            if layer(m) is not None and layer(t) is not None and layer(t) > layer(m):
                up.append(f"{m} -> {t}")
    assert not up, "imports that point up a layer:\n" + "\n".join(sorted(up))


def test_no_import_circle():
    g = graph()
    circles, state = [], {}

    def visit(m, path):
        state[m] = "open"
        for t in sorted(g.get(m, ())):
            if state.get(t) == "open":
                circles.append(" -> ".join(path[path.index(t):] + [t]) if t in path else f"{m} -> {t}")
            elif t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_test_sees_upward_imports_and_circles(tmp_path):
    """The graph is read right: a known downward edge is found (so the tests above
    are not vacuous), and a made-up upward import would be caught."""
    g = graph()
    assert "store.sql" in g["query.reports"] and "query.reports" in g["analysis.advise"]
    assert "ingest.batch" in g["api"] and "ingest.batch" in g["cli"]
    assert layer("store.db") < layer("ingest.batch") < layer("query.reports") < layer("analysis.advise") \
        < layer("present.html_report") < layer("capture.session") < layer("api") < layer("cli")


@pytest.mark.parametrize("name", catalog.view_files())
def test_view_files_declare_what_they_build_on(name):
    """Each view file's `-- includes:` line names exactly the view files whose views or
    macros it uses, so the order the store applies them in (derived from those lines)
    cannot drift from the SQL."""
    defined = {}
    for other in catalog.view_files():
        for n in catalog.defined_names(catalog.sql_text("schema", other)):
            defined[n] = other
    body = re.sub(r"--[^\n]*", "", catalog.sql_text("schema", name))
    used = {f for n, f in defined.items() if f != name and re.search(rf"\b{n}\b", body)}
    assert set(catalog.includes(name)) == used, name
    order = catalog.view_files()
    assert all(order.index(dep) < order.index(name) for dep in used)
