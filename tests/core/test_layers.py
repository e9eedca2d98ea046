"""The package's layers, as docs/architecture.md draws them: imports go down, and no two modules
import each other, directly or round a loop (imports a type checker alone reads excepted).

Read from the source with ``ast``, so that an import inside a function counts as much as one at
the top of a module: it runs as surely, only later.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "llmtrace"

# Lowest first. A module belongs to the longest prefix listed; the root package (``llmtrace``,
# its ``__init__``) is the public facade over the runtime and the instrumentations.
LAYERS: dict[str, int] = {
    "llmtrace._version": 0,
    "llmtrace._native": 0,
    "llmtrace._checks": 0,
    "llmtrace._urls": 0,
    "llmtrace.errors": 0,
    "llmtrace.semconv": 0,
    "llmtrace.options": 1,
    "llmtrace.analysis": 2,
    "llmtrace.sdk": 3,
    "llmtrace.instrumentation": 4,
    "llmtrace.server": 4,
    "llmtrace": 5,
    "llmtrace.bench": 6,
    "llmtrace.demo": 7,
    "llmtrace.commands": 8,
    "llmtrace.cli": 9,
    "llmtrace.__main__": 10,
}

# The one import that reaches up, on purpose: init() and shutdown() compose the runtime and the
# instrumentations (they instrument and uninstrument the libraries through the registry).
REACHING_UP = {("llmtrace.sdk.config", "llmtrace.instrumentation.registry")}


def _modules() -> dict[str, Path]:
    found = {}
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi")]:  # .pyi: the native reader
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


class _Imports(ast.NodeVisitor):
    """The llmtrace modules a module imports, leaving out ``if TYPE_CHECKING:`` blocks."""

    def __init__(self, modules: dict[str, Path]) -> None:
        self.modules = modules
        self.found: set[str] = set()

    def _module_of(self, name: str) -> str:
        while name not in self.modules and "." in name:
            name = name.rpartition(".")[0]
        return name

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        assert node.level == 0, "llmtrace imports its modules by their full names"
        if node.module and node.module.split(".")[0] == "llmtrace":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                self.found.add(full if full in self.modules else self._module_of(node.module))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "llmtrace":
                self.found.add(self._module_of(alias.name))


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        visitor = _Imports(modules)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        graph[name] = visitor.found - {name}
    return graph


def _layer(module: str) -> int:
    owner = max(
        (prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")),
        key=len,
    )
    return LAYERS[owner]


def test_imports_go_down() -> None:
    upward = sorted(
        (module, imported)
        for module, imports in _graph().items()
        for imported in imports
        if _layer(imported) > _layer(module) and (module, imported) not in REACHING_UP
    )
    assert upward == [], "imports reaching a higher layer (docs/architecture.md, Layers)"


def test_the_one_import_that_reaches_up_is_still_needed() -> None:
    graph = _graph()
    assert all(imported in graph[module] for module, imported in REACHING_UP)


def test_no_import_cycle() -> None:
    graph = _graph()
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert cycles == []


def test_a_cycle_or_an_upward_import_would_be_seen() -> None:
    # The checks above read what they are meant to: the analysis imports the model, the runtime
    # the analysis, and a module importing from a package counts as importing its module.
    graph = _graph()
    assert "llmtrace.analysis.model" in graph["llmtrace.analysis.breakdown"]
    assert "llmtrace.analysis.breakdown" in graph["llmtrace.sdk.request_metrics"]
    assert "llmtrace.sdk.gate" in graph["llmtrace.instrumentation.model_call"]
    assert _layer("llmtrace.sdk.gate") < _layer("llmtrace.instrumentation.hops.hop")
