"""The package's layers (docs/ARCHITECTURE.md): imports go down only, and no module imports
itself back through another.

    cli → ops → inputs, host → model        (``cgalloc.errors`` is below them all)

Every import counts: top-level, inside a function, and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cgalloc"
# what each layer may import besides itself
ALLOWED = {
    "model": {"errors"},
    "inputs": {"errors", "model"},
    "host": {"errors", "model"},
    "ops": {"errors", "model", "inputs", "host"},
    "cli": {"errors", "model", "inputs", "host", "ops"},
    "errors": set(),
}


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The cgalloc modules ``path`` imports (a name imported from a package counts as that
    package's module of that name when there is one)."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cgalloc"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            if not base.startswith("cgalloc"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if _exists(sub) else base)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_every_module_is_in_a_layer():
    top = ("cgalloc", "cgalloc.__main__", "cgalloc.data")
    odd = [m for m in _graph() if _layer(m) not in ALLOWED and m not in top]
    assert odd == []


def test_imports_go_down_only():
    wrong = []
    for module, imports in sorted(_graph().items()):
        layer = _layer(module)
        if layer not in ALLOWED:
            continue
        for imported in sorted(imports):
            other = _layer(imported)
            if other is not None and other != layer and other not in ALLOWED[layer]:
                wrong.append(f"{module} -> {imported}")
    assert wrong == []


def test_no_import_cycles():
    graph = _graph()
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if n == m or n not in graph:
                continue
            if state.get(n) == 1:
                cycles.append(" -> ".join([*stack[stack.index(n):], n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    # a package's __init__ importing its own submodules is a facade, not a cycle
    cycles = [c for c in cycles if not _facade(c)]
    assert cycles == []


def _facade(cycle: str) -> bool:
    mods = cycle.split(" -> ")
    return any(b.startswith(a + ".") for a, b in itertools.pairwise(mods))
