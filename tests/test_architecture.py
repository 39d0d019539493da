"""Imports run downward: no cycles, and the building blocks in agent/ never import the methods in graphs/.

Every import counts, lazy ones inside functions too: a cycle through a function-level import is still a cycle.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    modules = {}
    for package in ("agent", "graphs"):
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (``from a.b import c`` counts as a.b.c when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    targets = set()
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            targets.add(target)
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_no_import_cycles():
    graph = import_graph()
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            assert state.get(target) != "open", f"import cycle: {' -> '.join([*path, target])}"
            if target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_agent_reaches_graphs_only_through_the_registry():
    graph = import_graph()
    upward = sorted(
        (a, b) for a, targets in graph.items() for b in targets if a.startswith("agent") and b.startswith("graphs")
    )
    assert upward == []
    registry = (ROOT / "agent" / "registry.py").read_text()
    assert 'import_module(f"graphs.{method}")' in registry  # the one, lazy, way from agent/ to graphs/


def test_building_blocks_do_not_import_surfaces_or_evaluation():
    graph = import_graph()
    lower = [
        m for m in graph if m.startswith(("agent.llm", "agent.retrieval", "agent.steps")) or m.startswith("graphs")
    ]
    for module in lower:
        assert not {t for t in graph[module] if t.startswith(("agent.surfaces", "agent.eval", "agent.runner"))}, module


FOUNDATION = {"agent.errors", "agent.settings", "agent.schemas", "agent.text", "agent.resources", "agent.processes"}
FOUNDATION |= {"agent.questions"}


def test_the_foundation_imports_only_the_foundation_and_llm_and_retrieval_not_each_other():
    """The bottom of the picture in docs/architecture.md: a foundation module that imported the LLM boundary or
    retrieval would tie those two together through it (agent.text once imported llm.parsing and retrieval.terms)."""
    graph = import_graph()
    for module in FOUNDATION:
        assert graph[module] <= FOUNDATION, (module, graph[module] - FOUNDATION)
    for module, targets in graph.items():
        if module.startswith("agent.llm"):
            assert not {t for t in targets if t.startswith(("agent.retrieval", "agent.steps"))}, module
        if module.startswith("agent.retrieval"):
            assert not {t for t in targets if t.startswith(("agent.llm", "agent.steps"))}, module


def test_no_module_imports_a_private_module_of_langchain_or_langgraph():
    """A private module (``langgraph._internal``) would tie the package to one exact release of the library."""
    private = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            modules += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            private += [
                (name, m)
                for m in modules
                if m.startswith(("langchain", "langgraph")) and any(p.startswith("_") for p in m.split(".")[1:])
            ]
    assert private == []
