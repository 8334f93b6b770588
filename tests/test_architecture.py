"""The rules of ARCHITECTURE.md that code can check: no import cycle among kvlab's modules, no module global
carrying results between modules, ipywidgets only in kvlab/viz, every control label one constant, and the map
itself true (every module it names exists, every module is named, nothing outside the repository is cited).

``python tests/test_architecture.py`` prints the import graph, one module per line with what it imports.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kvlab"
INPUT_CHECKS = {"whole_number", "whole_numbers", "choice", "positive_number", "one_of_numbers", "prompt_tokens",
                "InputError"}
CONTROL_FACTORIES = {"int_slider", "int_box", "float_box", "text_box", "dropdown", "selection_slider", "multi_select",
                     "checkbox", "play_slider"}


def module_files() -> dict[str, Path]:
    """``{"kvlab.lessons.decode": path}`` for every module of the package (a package by its ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (read by type checkers, never run)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The kvlab modules ``name`` imports when it runs: at the top and inside functions alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_among_kvlab_modules():
    graph = import_graph()
    assert len(graph) > 40 and "kvlab.measure" in graph["kvlab.lessons.decode.timings"]  # the graph is really read
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_count():
    """An import inside a function is an edge too: hiding a cycle there (as generation <-> measure once did) fails."""
    modules = module_files()
    source = "def f():\n    from .generation import generate\n"
    path = ROOT / "tests" / "_probe_measure.py"
    path.write_text(source, encoding="utf-8")
    try:
        assert imports_of("kvlab.measure", path, modules) == {"kvlab.generation"}
    finally:
        path.unlink()


def test_no_module_global_carries_results():
    """No ``global`` statement, and no module assigns to another kvlab module's attributes: results travel as
    arguments and return values (exercise 3.3-1 gets the page's roofs passed in, not read from the lesson)."""
    found = []
    for name, path in module_files().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        kvlab_aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                         for a in n.names if (n.level or (n.module or "").startswith("kvlab"))}
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.append(f"{name}:{node.lineno}: global {', '.join(node.names)}")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in kvlab_aliases \
                        and t.value.id[0].islower():
                    found.append(f"{name}:{node.lineno}: assigns {t.value.id}.{t.attr}")
    assert found == []


def test_only_viz_touches_ipywidgets():
    found = [name for name, path in module_files().items() if not name.startswith("kvlab.viz")
             and re.search(r"^\s*(import ipywidgets|from ipywidgets)", path.read_text(encoding="utf-8"), re.M)]
    assert found == []


def test_every_control_label_is_one_constant():
    """A label typed as a string where a lesson checks a value or builds a control could differ from the one on
    screen; a constant passed to both cannot."""
    found = []
    for path in sorted((PACKAGE / "lessons").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args:
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if func in INPUT_CHECKS | CONTROL_FACTORIES and isinstance(node.args[0], (ast.Constant, ast.JoinedStr)):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {func}({ast.unparse(node.args[0])})")
    assert found == []


# -- ARCHITECTURE.md is true --------------------------------------------------------------------------------
ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def _map_names() -> set[str]:
    """The file names the map mentions; ``chNN.py``, ``<name>.py`` and the like are templates, not files."""
    names = re.findall(r"[\w/.<>-]*\w>?\.py\b", ARCHITECTURE.read_text(encoding="utf-8"))
    return {n for n in names if "NN" not in n and "<" not in n and not n.startswith("_plots")}


def test_architecture_names_every_module():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py") and p.name not in text
               and re.sub(r"\d\d", "NN", p.name) not in text]  # chNN.py names every chapter's module
    assert missing == [], "ARCHITECTURE.md does not say where these live"


def test_architecture_names_no_module_that_does_not_exist():
    existing = {p.name for p in ROOT.rglob("*.py")} | {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")}
    assert sorted(n for n in _map_names() if n not in existing and n.split("/")[-1] not in existing) == []


def test_the_public_api_of_design_md_is_importable():
    """Every name DESIGN.md's API block promises (a line starting at column 0) is importable from kvlab."""
    import importlib

    import kvlab

    text = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    block = text.split("## The public API", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    names = [n for line in block.splitlines() if line[:1].isalpha()
             for n in re.findall(r"[A-Za-z_][\w.]*", line.split("(")[0].split("->")[0].split("#")[0])]
    assert {"ModelConfig", "generate", "KVCache", "load_demo_model", "kvlab.interop.to_hf_llama"} <= set(names)
    for name in names:
        module, _, attr = name.rpartition(".")
        assert hasattr(importlib.import_module(module) if module else kvlab, attr), name
        assert module or attr in kvlab.__all__, f"{name} is not in kvlab.__all__"


def test_the_core_never_imports_the_course_layer():
    """config, model, caches, generation, measurement ... (modules right under kvlab/) import no lesson, plot,
    widget or exercise: the course is built on the core, not the other way round."""
    course = ("kvlab.lessons", "kvlab.viz", "kvlab.exercises")
    # command lines above the course (ARCHITECTURE.md says why); kvlab.teacher reads the quizzes and exercises
    tools = ("kvlab.train", "kvlab.book", "kvlab.teacher")
    graph = import_graph()
    found = {name: sorted(m for m in graph[name] if m.startswith(course)) for name in graph
             if name.count(".") == 1 and not name.startswith(course + tools)}
    assert {n: ms for n, ms in found.items() if ms} == {}
    assert not [(n, m) for n in graph for m in graph[n] if m.startswith(tools) and not n.startswith(tools)
                and n != "kvlab.viz.widgets"]  # nothing imports the tools (widgets.show hands off to kvlab.book)


def test_nothing_points_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outside = re.compile(r"shared folder|/work/shared|shared/COURSE|COURSE\.md", re.I)
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix in (".py", ".md", ".ipynb", ".toml", ".txt", ".cfg", "") and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            found += [f"{name}: {m.group(0)}" for m in outside.finditer(text) if path != Path(__file__)]
    assert found == []


if __name__ == "__main__":
    graph = import_graph()
    for name in sorted(graph):
        print(f"{name} -> {', '.join(sorted(m.removeprefix('kvlab.') for m in graph[name])) or '(nothing in kvlab)'}")
    print(f"\n{len(graph)} modules, {sum(map(len, graph.values()))} imports, cycles: {cycles(graph) or 'none'}")
    sys.exit(1 if cycles(graph) else 0)
