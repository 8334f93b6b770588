"""The rules of ARCHITECTURE.md that code can check: the layer table (every module in one layer, every import,
at the top or inside a function, into a layer its row allows), the imports the graph cannot see, no import cycle,
module state only where the map lists it, ipywidgets only in kvlab/viz, every control label one constant, and the
map itself true (every module it names exists, every module and test file is named, the claims it makes about the
code hold, nothing outside the repository is cited).

``python tests/test_architecture.py`` prints the import graph, one module per line with what it imports, and the
imports that break the layer table.
"""
from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

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


@functools.lru_cache(maxsize=None)
def _parse(path: Path, stamp: tuple[int, int]) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once per version of the file (the tests only read it)."""
    st = path.stat()
    return _parse(path, (st.st_mtime_ns, st.st_size))


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (read by type checkers, never run)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


class Edge(NamedTuple):
    """One import of a kvlab module by another: ``run`` (at the top or inside a function: both run) or
    ``type_checking`` (under ``if TYPE_CHECKING:``, read by type checkers only)."""

    source: str
    target: str
    line: int
    kind: str


def import_edges(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """Every import of a kvlab module in ``path`` (read as module ``name``), with its line and kind."""
    tree = parsed(path)
    typing_only = _type_checking_only(tree)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        kind = "type_checking" if id(node) in typing_only else "run"
        found += [Edge(name, t, node.lineno, kind) for t in dict.fromkeys(targets) if t in modules and t != name]
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The kvlab modules ``name`` imports when it runs: at the top and inside functions alike."""
    return {e.target for e in import_edges(name, path, modules) if e.kind == "run"}


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


def test_function_level_imports_count(tmp_path):
    """An import inside a function is an edge too: hiding a cycle there (as generation <-> measure once did) fails."""
    path = tmp_path / "measure.py"
    path.write_text("def f():\n    from .generation import generate\n", encoding="utf-8")
    assert imports_of("kvlab.measure", path, module_files()) == {"kvlab.generation"}


def test_no_module_assigns_another_modules_attributes():
    """No module assigns to another kvlab module's attributes: results travel as arguments and return values
    (exercise 3.3-1 gets the page's roofs passed in, not read from the lesson). State a module keeps for itself is
    :func:`test_module_state_is_what_the_map_lists`'s."""
    found = []
    for name, path in module_files().items():
        tree = parsed(path)
        kvlab_aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                         for a in n.names if (n.level or (n.module or "").startswith("kvlab"))}
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in kvlab_aliases \
                        and t.value.id[0].islower():
                    found.append(f"{name}:{node.lineno}: assigns {t.value.id}.{t.attr}")
    assert found == []


# -- module state ----------------------------------------------------------------------------------------------
MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "clear", "remove", "discard",
            "appendleft", "extendleft", "popleft", "sort", "reverse", "__setitem__", "__delitem__"}


def _root(node: ast.expr) -> tuple[str | None, list[str]]:
    """``Panel._newest[k]`` -> ("Panel", ["_newest"]): the name an attribute or subscript chain starts from."""
    chain = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            chain.append(node.attr)
        node = node.value
    return (node.id if isinstance(node, ast.Name) else None), chain[::-1]


def _is_memo(decorator: ast.expr) -> bool:
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in ("cache", "lru_cache")


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def _class_attributes(cls: ast.ClassDef) -> set[str]:
    """Names assigned in a class body that live on the class (a dataclass's annotated fields live on instances)."""
    out = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign):
            out |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and not _is_dataclass(cls):
            out.add(stmt.target.id)
    return out


def _written(fn: ast.AST) -> list[ast.expr]:
    """What a function writes through: assignment, augmented assignment and ``del`` targets, mutating calls' objects."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.Delete)):
            out += node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            out.append(node.target)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            out.append(node.func.value)
    return [t for t in out if isinstance(t, (ast.Attribute, ast.Subscript))]


def module_state(tree: ast.Module) -> set[str]:
    """The state a module keeps between calls: names its functions write at module or class level (``x[k] = v``,
    ``x.attr = v``, ``x.append(v)``, ``Class.attr = v``, ``self.attr[k] = v`` on a class attribute no instance
    shadows), ``global`` names, and memoised functions (``f()``, decorated with ``cache`` or ``lru_cache``)."""
    top = {}
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        top.update({t.id: stmt for t in targets if isinstance(t, ast.Name)})
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            top[stmt.name] = stmt
    found = set()

    def scan(fn, cls: ast.ClassDef | None = None, instance_attributes: frozenset = frozenset()):
        local = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        found.update(name for node in ast.walk(fn) if isinstance(node, ast.Global) for name in node.names)
        for target in _written(fn):
            name, chain = _root(target)
            if name in top and name not in local:
                found.add(f"{name}.{chain[0]}" if isinstance(top[name], ast.ClassDef) and chain else name)
            elif cls is not None and name in ("self", "cls") and chain and chain[0] in _class_attributes(cls) \
                    and chain[0] not in instance_attributes:
                found.add(f"{cls.name}.{chain[0]}")

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scan(stmt)
            found |= {f"{stmt.name}()"} if any(map(_is_memo, stmt.decorator_list)) else set()
        elif isinstance(stmt, ast.ClassDef):
            on_instances = frozenset(t.attr for t in _written(stmt) if isinstance(t, ast.Attribute)
                                     and getattr(t.value, "id", "") == "self")
            for fn in stmt.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    scan(fn, stmt, on_instances)
                    found |= {f"{stmt.name}.{fn.name}()"} if any(map(_is_memo, fn.decorator_list)) else set()
    return found


def test_module_state_is_what_the_map_lists():
    """State kept between calls at module or class level is found in the code and compared with the map's list."""
    found = {(name, s) for name, path in module_files().items()
             for s in module_state(parsed(path))}
    section = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## Module state")
    listed = {(module_prefix(_ticked(module)[0]), s) for module, state, _ in _table(section, "| module |")
              for s in _ticked(state)}
    assert sorted(found - listed) == [], "state the map does not list (remove it, or list it with its reason)"
    assert sorted(listed - found) == [], "the map lists state that is gone"


def test_the_state_finder_sees_capitalised_names_subscripts_and_class_attributes():
    source = """
import functools
from dataclasses import dataclass, field
ATTEMPTS = {}
_shared = []
LIMIT = 3

class Panel:
    _newest = {}
    _mine = None

    def __init__(self):
        self._mine = []
        self._mine.append(1)            # an instance's own list: no module state

    def show(self, key):
        Panel._newest[key] = self

class Ahead:
    _latest = None

    def schedule(self):
        Ahead._latest = self

@dataclass
class Record:
    items: list = field(default_factory=list)

    def add(self, x):
        self.items.append(x)            # a dataclass field lives on the instance

@functools.lru_cache(maxsize=None)
def demo():
    return object()

def check(key, LIMIT=LIMIT):
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    _shared[:] = [key]
    local = {}
    local[key] = 1
    return LIMIT
"""
    assert module_state(ast.parse(source)) == {"ATTEMPTS", "_shared", "Panel._newest", "Ahead._latest", "demo()"}


def test_the_widget_libraries_are_imported_where_the_map_says():
    """ipywidgets and anywidget are imported only by the viz modules the map's Layers section names."""
    layers = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## Layers")
    sentence = layers.split("the only modules that import ipywidgets or anywidget are", 1)[1].split(".\n", 1)[0]
    found = {name for name, path in module_files().items()
             if re.search(r"^\s*(import|from) (ipywidgets|anywidget)\b", path.read_text(encoding="utf-8"), re.M)}
    assert found == {module_prefix(p) for p in _ticked(sentence)}
    assert all(name.startswith("kvlab.viz.") for name in found)


def test_the_map_names_cache_modes_fields_as_they_are():
    from dataclasses import fields

    from kvlab.cache_modes import CacheMode

    named = re.findall(r"CacheMode\(([^)]*)\)", ARCHITECTURE.read_text(encoding="utf-8"))
    assert named and {tuple(n.split(", ")) for n in named} == {tuple(f.name for f in fields(CacheMode))}


def test_the_tests_map_names_every_file_in_tests():
    section = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## Tests")
    missing = [p.name for p in sorted((ROOT / "tests").glob("*.py"))
               if not re.search(rf"(?<![\w<]){re.escape(p.name)}", section)
               and not (p.name.startswith("test_lesson_") and "test_lesson_<name>.py" in section)]
    assert missing == []


def test_every_control_label_is_one_constant():
    """A label typed as a string where a lesson checks a value or builds a control could differ from the one on
    screen; a constant passed to both cannot."""
    found = []
    for path in sorted((PACKAGE / "lessons").rglob("*.py")):
        for node in ast.walk(parsed(path)):
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


# -- the layer table ------------------------------------------------------------------------------------------
def _section(text: str, heading: str) -> str:
    """The text under ``heading`` (a markdown heading line) up to the next heading of the same or a higher level."""
    level = heading.split()[0]
    body = text.split(f"\n{heading}\n", 1)[1]
    ends = [m.start() for m in re.finditer(r"^#{1,%d} " % len(level), body, re.M)]
    return body[:ends[0]] if ends else body


def _table(section: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose header line starts with ``header``."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def module_prefix(entry: str) -> str:
    """``serving/`` -> ``kvlab.serving``, ``config.py`` -> ``kvlab.config``, ``viz/__init__.py`` -> ``kvlab.viz``."""
    name = entry.rstrip("/").removesuffix(".py").replace("/", ".").removesuffix("__init__").rstrip(".")
    return f"kvlab.{name}" if name else "kvlab"


def _in_entry(module: str, entry: str) -> bool:
    prefix = module_prefix(entry)
    return module == prefix or (entry.endswith("/") and module.startswith(prefix + "."))


class LayerTable(NamedTuple):
    """ARCHITECTURE.md's layer table: each module's layer, what each layer may import, the listed exceptions."""

    entries: dict[str, str]  # a table entry (``config.py``, ``viz/``) -> its layer
    may_import: dict[str, set[str]]
    exceptions: set[tuple[str, str]]  # (module, module) imports across the table on purpose

    def layer_of(self, module: str) -> list[str]:
        return [layer for entry, layer in self.entries.items() if _in_entry(module, entry)]

    def breaks(self, edge: Edge) -> bool:
        """Whether a run-time import goes where its module's layer may not."""
        source, target = self.layer_of(edge.source), self.layer_of(edge.target)
        allowed = source and target and target[0] in self.may_import[source[0]]
        return not allowed and (edge.source, edge.target) not in self.exceptions


def read_layers(text: str) -> LayerTable:
    section = _section(text, "## Layers")
    entries, may_import = {}, {}
    for layer, modules, allowed in _table(section, "| layer |"):
        may_import[layer] = {a.strip() for a in allowed.split(",")}
        entries.update(dict.fromkeys(_ticked(modules), layer))
    exceptions = {(module_prefix(_ticked(a)[0]), module_prefix(_ticked(b)[0])) for a, b, _ in _table(section, "| module |")}
    return LayerTable(entries, may_import, exceptions)


def all_edges() -> list[Edge]:
    modules = module_files()
    return [e for name, path in modules.items() for e in import_edges(name, path, modules)]


def layer_breaks(edges: list[Edge], table: LayerTable) -> list[str]:
    return [f"{e.source}:{e.line} imports {e.target} ({table.layer_of(e.source)} -> {table.layer_of(e.target)})"
            for e in edges if e.kind == "run" and table.breaks(e)]


def test_every_module_is_in_exactly_one_layer():
    table = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert set(table.may_import) == set(table.entries.values())
    assert all(allowed <= set(table.may_import) for allowed in table.may_import.values())
    modules = module_files()
    assert {m: table.layer_of(m) for m in modules if len(table.layer_of(m)) != 1} == {}
    assert [e for e in table.entries if not any(_in_entry(m, e) for m in modules)] == []  # no stale entry


def test_every_import_keeps_to_the_layer_table():
    table = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    edges = all_edges()
    assert layer_breaks(edges, table) == []
    used = {(e.source, e.target) for e in edges if e.kind == "run"}
    assert sorted(table.exceptions - used) == []  # a listed exception that no longer happens is removed from the map


def test_the_layer_check_fails_on_a_planted_wrong_import(tmp_path):
    """A core module importing a lesson, at the top or inside a function, and an exercise importing a lesson are
    found; the same imports in the allowed direction are not."""
    table = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    modules = module_files()
    planted = tmp_path / "config.py"
    planted.write_text("from .stats import median\n\ndef f():\n    from .lessons import decode\n", encoding="utf-8")
    edges = import_edges("kvlab.config", planted, modules)
    assert [b.split(" (")[0] for b in layer_breaks(edges, table)] == ["kvlab.config:4 imports kvlab.lessons.decode"]
    exercise = tmp_path / "ch09.py"
    exercise.write_text("from ..lessons.prefill_decode import Roofs\nfrom ..measure import Roofs\n", encoding="utf-8")
    assert len(layer_breaks(import_edges("kvlab.exercises.ch09", exercise, modules), table)) == 1
    assert table.breaks(Edge("kvlab.lessons.decode", "kvlab.exercises.checker", 1, "run"))
    assert table.breaks(Edge("kvlab.viz.quiz", "kvlab.exercises.quiz", 1, "run"))
    assert not table.breaks(Edge("kvlab.lessons.decode", "kvlab.viz.widgets", 1, "run"))


def test_type_checking_imports_are_the_ones_the_map_counts():
    """Imports under ``if TYPE_CHECKING:`` are no edge; the map says how many each module has, so a new one is seen."""
    text = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## Layers")
    counted = text.split("The test counts them per module:", 1)[1].split("\n\n", 1)[0]
    listed = {module_prefix(path): int(n) for path, n in re.findall(r"`([\w/]+\.py)` \((\d+)\)", counted)}
    found = {}
    for edge in all_edges():
        if edge.kind == "type_checking":
            found[edge.source] = found.get(edge.source, set()) | {edge.line}
    assert {m: len(lines) for m, lines in found.items()} == listed and sum(listed.values()) >= 5


def test_the_imports_the_graph_cannot_see_are_listed():
    """``importlib.import_module`` names a module at run time, out of the graph's sight: the map lists who does it."""
    text = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## Layers")
    paragraph = text.split("Imports the test cannot see", 1)[1].split("\n\n", 1)[0]
    listed = {module_prefix(p) for p in _ticked(paragraph) if p.endswith(".py") and "/chNN" not in p and p != "chNN.py"}
    found = set()
    for name, path in module_files().items():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Call):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if func in ("import_module", "__import__"):
                    found.add(name)
    assert found == listed


def _home(entry: str) -> tuple[str, str | None]:
    """``memory.stored_tokens`` -> ("kvlab.memory", "stored_tokens"); ``stats.py`` -> ("kvlab.stats", None)."""
    if entry.endswith((".py", "/")):
        return module_prefix(entry), None
    parts = entry.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        if f"kvlab.{'.'.join(parts[:cut])}" in module_files():
            return f"kvlab.{'.'.join(parts[:cut])}", ".".join(parts[cut:])
    raise AssertionError(f"{entry}: no kvlab module")


def test_each_idea_has_the_home_and_users_the_map_says():
    """The map's "One home for each idea": every home exists (module, or a name in it), and every module or package
    named as a user imports the home and (for a name) says its name."""
    import importlib

    section = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## One home for each idea")
    graph, modules = import_graph(), module_files()
    problems = []
    for idea, home_cell, users_cell in _table(section, "| idea |"):
        homes = [_home(e) for e in _ticked(home_cell)]
        for module, name in homes:
            obj = importlib.import_module(module)
            for part in (name.split(".") if name else []):
                obj = getattr(obj, part, None)
            problems += [f"{idea}: {module}.{name} does not exist"] if obj is None else []
        users = [u for u in _ticked(users_cell) if u.endswith((".py", "/"))]
        assert users, idea
        for user in users:
            found = [m for m in modules if _in_entry(m, user)
                     and any(h == d or d.startswith(h + ".") for h, _ in homes for d in graph[m])
                     and all(n is None for _, n in homes) | any(
                         re.search(rf"\b{n.split('.')[-1]}\b", modules[m].read_text(encoding="utf-8"))
                         for _, n in homes if n)]
            problems += [] if found else [f"{idea}: {user} does not use {home_cell}"]
    assert problems == []


def test_no_check_and_no_host_sync_inside_generates_timed_passes(monkeypatch):
    """The map's "Validation once, at the entry" for generate (serving's runner has its own test in test_serving.py):
    inside each timed pass, in every cache mode, none of the model's argument checks runs and nothing is read back
    to the host (no .item(), .tolist(), .cpu(), bool(), int() or float() of a tensor)."""
    import torch

    import kvlab.generation
    from kvlab import CACHE_MODES, ModelConfig, generate
    from kvlab.model import ToyTransformer

    def refuse(*args, **kwargs):
        raise AssertionError("checked or synchronised inside a timed pass")

    entered = []

    def guard(run_pass):
        def guarded(*args, **kwargs):
            entered.append(run_pass.__name__)
            with monkeypatch.context() as m:
                for name in ("forward", "check_ids", "check_pad", "check_cache"):
                    m.setattr(ToyTransformer, name, refuse)
                for name in ("item", "tolist", "cpu", "__bool__", "__int__", "__float__"):
                    m.setattr(torch.Tensor, name, refuse)
                return run_pass(*args, **kwargs)
        return guarded

    monkeypatch.setattr(ToyTransformer, "forward_unchecked", guard(ToyTransformer.forward_unchecked))
    monkeypatch.setattr(kvlab.generation, "k_only_forward_unchecked", guard(kvlab.generation.k_only_forward_unchecked))
    model = ToyTransformer(ModelConfig(vocab_size=32, d_model=16, n_layer=2, n_head=2, max_seq_len=64), seed=0).eval()
    for mode in CACHE_MODES:
        entered.clear()
        result = generate(model, [[1, 2, 3], [4, 5]], 5, cache=mode, prefill_chunk_size=2)
        assert len(entered) == len(result.trace) >= 5, mode  # every timed pass ran guarded


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
    breaks = layer_breaks(all_edges(), read_layers(ARCHITECTURE.read_text(encoding="utf-8")))
    print(f"\n{len(graph)} modules, {sum(map(len, graph.values()))} imports, cycles: {cycles(graph) or 'none'}")
    print("imports that break the layer table:", *(breaks or ["none"]), sep="\n  ")
    sys.exit(1 if cycles(graph) or breaks else 0)
