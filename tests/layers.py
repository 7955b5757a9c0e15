"""The import graph of workflows/ and dashboard/, read statically, and the layer rules it must keep.

Every module is parsed with `ast` (no import runs), and every `import` counts, also those inside
function bodies: an import hidden in a function is still a dependency, only a later one. `from a import
b` names the module `a.b` when there is one, else the module `a` (and `b` is a name in it). Migrations
are history and are not read. tests/test_layers.py holds the rules' known exceptions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("workflows", "dashboard")

# What outside workflows/runtime/ may import of it: the package itself (its __init__ re-exports the
# public API) and `observe` (commit observers, documented in the facade's docstring).
RUNTIME_FACADE = frozenset({"workflows.runtime", "workflows.runtime.observe"})

# The layers, bottom first: a group imports only groups of lower layers (and itself). A group is a
# package directly under workflows/ or dashboard/ (dashboard.api.v1 on its own), a root module, or one
# of the leaves named in GROUP_OF.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("workflows", "dashboard"),  # the packages' own __init__.py: empty, and to stay so
    ("workflows.engine", "workflows.episodes"),
    ("workflows.credentials.crypto", "workflows.credentials.rules", "workflows.db_threads", "workflows.live",
     "workflows.checks", "workflows.clock", "workflows.database_outage",
     "workflows.roles", "workflows.examples", "workflows.workers.dispatch"),
    ("workflows.fields",),
    ("workflows.models",),
    ("workflows.adapters", "workflows.credentials"),
    ("workflows.store",),
    ("workflows.runtime",),
    ("workflows.authoring", "workflows.observability", "workflows.triggers"),
    ("workflows.evaluations", "workflows.retention"),  # evaluations run versions (runtime) copied as
    # generated definitions (authoring); retention deletes history rows and rolls days up (models only)
    ("workflows.jobs", "workflows.workers"),
    ("workflows.scheduler",),
    ("workflows.operators",),
    ("workflows.admin", "workflows.management", "workflows.apps"),
    ("dashboard.env", "dashboard.models", "dashboard.templatetags", "dashboard.database_away"),
    ("dashboard.security",),
    ("dashboard.api.http",),
    ("dashboard.api.shapes",),  # the JSON shapes both APIs answer with (and the graph diff)
    ("dashboard.api.services",),  # what both APIs do, request aside (start, save, plan)
    ("dashboard.live", "dashboard.pages"),
    ("dashboard.api",),
    ("dashboard.api.v1",),
    ("dashboard.routing",),
    ("dashboard.admin", "dashboard.apps", "dashboard.asgi", "dashboard.urls", "dashboard.settings"),
)
# Modules that belong to another group than their folder's.
GROUP_OF = {
    "workflows.credentials.crypto": "workflows.credentials.crypto",  # settings only: fields use it
    "workflows.credentials.rules": "workflows.credentials.rules",  # plain rules: the model enforces them
    "workflows.triggers.models": "workflows.models",  # rows of the `workflows` app (workflows.models imports them)
    "workflows.evaluations.models": "workflows.models",  # likewise
    "workflows.retention.models": "workflows.models",  # likewise
    "workflows.credentials.models": "workflows.models",  # likewise
    "workflows.operators.models": "workflows.models",  # likewise
    "dashboard.api.http": "dashboard.api.http",  # the JSON helpers every endpoint shares, pages' included
    "dashboard.api.shapes": "dashboard.api.shapes",
    "dashboard.api.diff_details": "dashboard.api.shapes",
    "dashboard.api.stats": "dashboard.api.shapes",  # the dashboard's figures: the home page renders them too
    "dashboard.api.services": "dashboard.api.services",
    # Putting step ids on RQ queues (RQ and settings only): the runtime's post-commit effects enqueue
    # through it, the reconciler and the ai consumer too.
    "workflows.workers.dispatch": "workflows.workers.dispatch",
}
RANK = {group: rank for rank, groups in enumerate(LAYERS) for group in groups}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    names: tuple[str, ...] = ()  # names taken from `target` by `from target import ...` (not modules)
    line: int = 0
    in_function: bool = False
    type_only: bool = False  # under `if TYPE_CHECKING:`: never runs, so it makes no import-time cycle


@dataclass(frozen=True)
class Graph:
    modules: frozenset[str]
    imports: tuple[Import, ...]
    # (module, project module it names, underscore attribute) for `alias._name` on an imported module
    attribute_uses: tuple[tuple[str, str, str], ...] = ()

    def edges(self, *, type_only: bool = True) -> set[tuple[str, str]]:
        return {(i.source, i.target) for i in self.imports if i.source != i.target and (type_only or not i.type_only)}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                found[module_name(path)] = path
    return found


def is_project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def read_graph() -> Graph:
    paths = project_modules()
    modules = frozenset(paths)
    imports: list[Import] = []
    uses: list[tuple[str, str, str]] = []
    for name, path in paths.items():
        found, aliases = imports_of(name, ast.parse(path.read_text(), str(path)), modules)
        imports += found
        uses += underscore_attributes(name, ast.parse(path.read_text()), aliases)
    return Graph(modules, tuple(imports), tuple(uses))


def imports_of(source: str, tree: ast.Module, modules: frozenset[str]) -> tuple[list[Import], dict[str, str]]:
    """The module's imports of project modules, and the local names bound to project modules."""
    found: list[Import] = []
    aliases: dict[str, str] = {}
    for node, in_function, type_only in walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_project(alias.name):
                    found.append(Import(source, alias.name, (), node.lineno, in_function, type_only))
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and is_project(node.module):
            plain = []
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    found.append(Import(source, full, (), node.lineno, in_function, type_only))
                    aliases[alias.asname or alias.name] = full
                else:
                    plain.append(alias.name)
            if plain:
                found.append(Import(source, node.module, tuple(plain), node.lineno, in_function, type_only))
    return found, aliases


def walk(tree: ast.AST) -> Iterable[tuple[ast.AST, bool, bool]]:
    """Every node, with whether it sits inside a function body and whether under `if TYPE_CHECKING:`."""
    stack: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]
    while stack:
        node, in_function, type_only = stack.pop()
        yield node, in_function, type_only
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(node, ast.If) and is_type_checking(node.test):
            stack.extend((child, inner, True) for child in node.body)
            stack.extend((child, inner, type_only) for child in node.orelse)
            continue
        stack.extend((child, inner, type_only) for child in ast.iter_child_nodes(node))


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def underscore_attributes(source: str, tree: ast.Module, aliases: dict[str, str]) -> list[tuple[str, str, str]]:
    """`alias._name` where alias is a project module this module imported."""
    uses = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and is_private(node.attr)):
            uses.append((source, aliases[node.value.id], node.attr))
    return uses


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def group(module: str) -> str:
    if module in GROUP_OF:
        return GROUP_OF[module]
    parts = module.split(".")
    if parts[:3] == ["dashboard", "api", "v1"]:
        return "dashboard.api.v1"
    return ".".join(parts[:2])


# --- the rules: each returns its violations as sorted strings -------------------------------------

def engine_imports_nothing_of_the_project(graph: Graph) -> list[str]:
    return sorted({f"{s} -> {t}" for s, t in graph.edges()
                   if s.startswith("workflows.engine") and not t.startswith("workflows.engine")})


def workflows_never_imports_dashboard(graph: Graph) -> list[str]:
    return sorted({f"{s} -> {t}" for s, t in graph.edges()
                   if s.startswith("workflows") and t.startswith("dashboard")})


def store_imports_nothing_of_runtime(graph: Graph) -> list[str]:
    return sorted({f"{s} -> {t}" for s, t in graph.edges()
                   if s.startswith("workflows.store") and t.startswith("workflows.runtime")})


def only_the_runtime_facade_from_outside(graph: Graph) -> list[str]:
    return sorted({f"{s} -> {t}" for s, t in graph.edges()
                   if t.startswith("workflows.runtime.") and not s.startswith("workflows.runtime")
                   and t not in RUNTIME_FACADE})


def v1_uses_no_older_view_modules(graph: Graph) -> list[str]:
    """dashboard/api/v1/ goes to services (workflows/) and shared shapes, not to the pages' endpoints."""
    return sorted({f"{s} -> {t}" for s, t in graph.edges()
                   if group(s) == "dashboard.api.v1" and group(t) in ("dashboard.api", "dashboard.pages")})


def no_underscore_names_across_modules(graph: Graph) -> list[str]:
    found = {f"{i.source} -> {i.target}.{name}" for i in graph.imports if i.source != i.target
             for name in i.names if is_private(name)}
    found |= {f"{s} -> {t}.{name}" for s, t, name in graph.attribute_uses if s != t}
    return sorted(found)


def layers_point_down(graph: Graph) -> list[str]:
    """An import from a group to one of the same or a higher layer (groups not in LAYERS count too)."""
    found = set()
    for s, t in graph.edges():
        gs, gt = group(s), group(t)
        if gs == gt:
            continue
        if gs not in RANK or gt not in RANK:
            found.add(f"{gs} -> {gt} (a group LAYERS does not place)")
        elif RANK[gt] >= RANK[gs]:
            found.add(f"{gs} -> {gt}")
    return sorted(found)


def cycles(graph: Graph) -> list[str]:
    """The import cycles between modules (strongly connected components), each as its sorted members.
    Imports inside functions count (a cycle hidden in a function body is still a cycle); imports under
    `if TYPE_CHECKING:` do not (they never run)."""
    edges: dict[str, set[str]] = {}
    for s, t in graph.edges(type_only=False):
        edges.setdefault(s, set()).add(t)
    return sorted(" | ".join(sorted(c)) for c in strongly_connected(edges) if len(c) > 1)


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph has a few hundred modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    nodes = set(edges) | {t for ts in edges.values() for t in ts}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


RULES = {
    "engine": engine_imports_nothing_of_the_project,
    "workflows-dashboard": workflows_never_imports_dashboard,
    "store-runtime": store_imports_nothing_of_runtime,
    "runtime-facade": only_the_runtime_facade_from_outside,
    "v1-views": v1_uses_no_older_view_modules,
    "underscore": no_underscore_names_across_modules,
    "layers": layers_point_down,
    "cycles": cycles,
}
