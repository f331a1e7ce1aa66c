"""The package's layering, measured from its import statements.

Every module of ``hermeslab`` is parsed (not imported), so an import hidden
inside a function counts as much as one at the top; imports under
``if TYPE_CHECKING:`` are left out because they never run. A failure names
the file and line of each forbidden import, or prints the cycle.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import hermeslab

PACKAGE = "hermeslab"
PACKAGE_DIR = Path(hermeslab.__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent


@dataclass(frozen=True)
class Edge:
    """One import statement: ``source`` imports ``target`` at ``path:line``."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} imports {self.target}"


@dataclass(frozen=True)
class Rule:
    """Modules under any of ``sources`` may not import modules under ``forbidden`` (except under ``allowed``)."""

    sources: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()

    def breaks(self, edge: Edge) -> bool:
        return (_under(edge.source, self.sources) and _under(edge.target, self.forbidden)
                and not _under(edge.target, self.allowed))


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


# ---------------------------------------------------------------- reading the imports


def module_name(path: Path) -> str:
    """``hermeslab/context/prune.py`` → ``hermeslab.context.prune``; a package's ``__init__`` names the package."""
    parts = list(path.relative_to(REPO_DIR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _statements(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import under ``node`` that can run: bodies of ``if TYPE_CHECKING:`` are skipped, their ``else`` kept."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, (ast.Import, ast.ImportFrom)):
            found.append(current)
        elif isinstance(current, ast.If) and _is_type_checking(current.test):
            pending.extend(current.orelse)
        else:
            pending.extend(ast.iter_child_nodes(current))
    return sorted(found, key=lambda statement: (statement.lineno, statement.col_offset))


def _resolved(statement: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from`` import reads from (relative dots resolved against ``module``)."""
    if not statement.level:
        return statement.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (statement.level - 1)]
    return ".".join(base + ([statement.module] if statement.module else []))


def edges_in_source(source: str, module: str, path: str, *, is_package: bool = False,
                    known: frozenset[str] = frozenset()) -> list[Edge]:
    """The imports of hermeslab modules in one module's source.

    ``from package import name`` counts as importing ``package.name`` when that
    is a module in ``known`` (a submodule), else as importing ``package``.
    """
    edges = []
    for statement in _statements(ast.parse(source, filename=path)):
        if isinstance(statement, ast.Import):
            targets = [alias.name for alias in statement.names]
        else:
            origin = _resolved(statement, module, is_package)
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                       for alias in statement.names]
        edges += [Edge(module, target, path, statement.lineno)
                  for target in dict.fromkeys(targets) if _under(target, (PACKAGE,))]
    return edges


@cache
def package_edges() -> tuple[Edge, ...]:
    """Every import between hermeslab modules, in file order."""
    files = sorted(PACKAGE_DIR.rglob("*.py"))
    known = frozenset(module_name(path) for path in files)
    edges: list[Edge] = []
    for path in files:
        edges += edges_in_source(path.read_text(encoding="utf-8"), module_name(path),
                                 str(path.relative_to(REPO_DIR)), is_package=path.name == "__init__.py",
                                 known=known)
    return tuple(edges)


def violations(rule: Rule, edges: tuple[Edge, ...] | list[Edge]) -> list[str]:
    return [str(edge) for edge in edges if rule.breaks(edge)]


# ---------------------------------------------------------------- cycles between subpackages


def node_of(module: str) -> str | None:
    """The layer a module belongs to: its subpackage, or its top-level module; None for ``hermeslab`` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == PACKAGE else None


def _graph(edges: tuple[Edge, ...] | list[Edge]) -> dict[str, dict[str, Edge]]:
    """node → node it imports → the first import statement that makes the edge."""
    graph: dict[str, dict[str, Edge]] = {}
    for edge in edges:
        source, target = node_of(edge.source), node_of(edge.target)
        if source is not None and target is not None and source != target:
            graph.setdefault(source, {}).setdefault(target, edge)
            graph.setdefault(target, {})
    return graph


def _components(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _shortest_cycle(graph: dict[str, dict[str, Edge]], start: str, members: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside ``members``."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for step in sorted(graph[node]):
            if step not in members:
                continue
            if step == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if step not in previous:
                previous[step] = node
                queue.append(step)
    raise AssertionError(f"{start} is in a component but on no cycle")


def cycles(edges: tuple[Edge, ...] | list[Edge]) -> list[str]:
    """Each cycle between layers as ``a → b → a`` followed by the import behind every hop.

    A component gets one shortest cycle through each of its members (repeats
    dropped), so every layer that takes part is shown with the lines to cut.
    """
    graph = _graph(edges)
    reports: list[str] = []
    for component in _components(graph):
        seen: set[tuple[str, ...]] = set()
        for member in component:
            path = _shortest_cycle(graph, member, set(component))
            turn = path.index(min(path[:-1]))
            key = tuple(path[turn:-1] + path[:turn])
            if key in seen:
                continue
            seen.add(key)
            hops = "\n".join(f"    {graph[a][b]}" for a, b in zip(path, path[1:]))
            reports.append(" → ".join(path) + "\n" + hops)
    return reports


# ---------------------------------------------------------------- the rules

CORE_IS_SELF_CONTAINED = Rule(sources=("hermeslab.core",), forbidden=(PACKAGE,), allowed=("hermeslab.core",))
PIPELINE_STAYS_PURE = Rule(
    sources=("hermeslab.context", "hermeslab.recovery"),
    forbidden=("hermeslab.providers", "hermeslab.store", "hermeslab.notebook", "hermeslab.agent", "hermeslab.eval"))
AGENT_EMITS_EVENTS_ONLY = Rule(sources=("hermeslab.agent",), forbidden=("hermeslab.store", "hermeslab.notebook"))
TOOLS_KNOW_NO_MEMORY = Rule(sources=("hermeslab.tools",), forbidden=("hermeslab.memory",))
NOTEBOOK_KNOWS_NO_EVAL = Rule(sources=("hermeslab.notebook",), forbidden=("hermeslab.eval",))
MACHINERY_KNOWS_NO_POLICY = Rule(sources=("hermeslab.core", "hermeslab.context"), forbidden=("hermeslab.policies",))


def _report(found: list[str]) -> str:
    return "\n" + "\n".join(found)


# ---------------------------------------------------------------- the checker itself


SYNTHETIC = '''\
from typing import TYPE_CHECKING
from ..core.tokens import count_text
from .. import agent
if TYPE_CHECKING:
    from hermeslab.store import Lab
else:
    import hermeslab.providers.replay

def later():
    from hermeslab.eval.recording import Recording
'''


def test_the_checker_catches_forbidden_edges_in_a_synthetic_module_even_inside_functions():
    edges = edges_in_source(SYNTHETIC, "hermeslab.context.fake", "hermeslab/context/fake.py",
                            known=frozenset({"hermeslab.agent"}))
    assert [(edge.target, edge.line) for edge in edges] == [
        ("hermeslab.core.tokens", 2), ("hermeslab.agent", 3), ("hermeslab.providers.replay", 7),
        ("hermeslab.eval.recording", 10)]
    assert violations(PIPELINE_STAYS_PURE, edges) == [
        "hermeslab/context/fake.py:3: hermeslab.context.fake imports hermeslab.agent",
        "hermeslab/context/fake.py:7: hermeslab.context.fake imports hermeslab.providers.replay",
        "hermeslab/context/fake.py:10: hermeslab.context.fake imports hermeslab.eval.recording",
    ]
    assert violations(CORE_IS_SELF_CONTAINED, edges) == []


def test_the_checker_resolves_relative_imports_from_a_package_init():
    edges = edges_in_source("from .tokens import count_text\nfrom ..tools import Tool\n", "hermeslab.core",
                            "hermeslab/core/__init__.py", is_package=True)
    assert [edge.target for edge in edges] == ["hermeslab.core.tokens", "hermeslab.tools"]
    assert violations(CORE_IS_SELF_CONTAINED, edges) == [
        "hermeslab/core/__init__.py:2: hermeslab.core imports hermeslab.tools"]


def test_the_checker_prints_a_cycle_between_subpackages_with_its_lines():
    edges = [Edge("hermeslab.memory.review", "hermeslab.agent", "hermeslab/memory/review.py", 85),
             Edge("hermeslab.agent", "hermeslab.memory.manager", "hermeslab/agent.py", 79),
             Edge("hermeslab.agent", "hermeslab.core.config", "hermeslab/agent.py", 22)]
    assert cycles(edges) == [
        "agent → memory → agent\n"
        "    hermeslab/agent.py:79: hermeslab.agent imports hermeslab.memory.manager\n"
        "    hermeslab/memory/review.py:85: hermeslab.memory.review imports hermeslab.agent"]
    assert cycles(edges[1:]) == []


def test_the_whole_package_is_scanned():
    modules = {edge.source for edge in package_edges()}
    assert {"hermeslab.core.tokens", "hermeslab.context.pipeline", "hermeslab.agent", "hermeslab.eval.ab"} <= modules


# ---------------------------------------------------------------- the package


def test_core_imports_nothing_else_of_hermeslab():
    found = violations(CORE_IS_SELF_CONTAINED, package_edges())
    assert not found, _report(found)


def test_context_and_recovery_import_no_provider_implementation_store_notebook_agent_or_eval():
    found = violations(PIPELINE_STAYS_PURE, package_edges())
    assert not found, _report(found)


def test_the_agent_imports_neither_the_store_nor_the_notebook():
    found = violations(AGENT_EMITS_EVENTS_ONLY, package_edges())
    assert not found, _report(found)


def test_tools_do_not_import_memory():
    found = violations(TOOLS_KNOW_NO_MEMORY, package_edges())
    assert not found, _report(found)


def test_the_notebook_does_not_import_eval():
    found = violations(NOTEBOOK_KNOWS_NO_EVAL, package_edges())
    assert not found, _report(found)


def test_core_and_the_context_machinery_import_no_policy():
    found = violations(MACHINERY_KNOWS_NO_POLICY, package_edges())
    assert not found, _report(found)


def test_core_names_no_other_agent():
    """The schema knows no agent: each agent's numbers and rules are its policy module's."""
    from hermeslab.policies.registry import registry

    words = {entry.policy.agent.split()[0].strip("(,") for entry in registry().entries
             if not entry.policy.agent.startswith(("hermeslab", "Hermes"))}
    found = [f"{path.relative_to(REPO_DIR)}:{number}: {word}"
             for path in sorted((PACKAGE_DIR / "core").rglob("*")) if path.suffix in (".py", ".c")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for word in sorted(words) if re.search(rf"\b{re.escape(word)}\b", line)]
    assert words and not found, _report(found)


def test_no_subpackages_import_each_other_in_a_cycle():
    found = cycles(package_edges())
    assert not found, _report(found)
