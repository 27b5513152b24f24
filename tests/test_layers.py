"""The import layers of the source: no cycle between modules or between packages, the
core never reaching out of itself, and every arrow between `streaming` packages one the
package docstrings allow.

Imports are read from the source (ast), not run, so an import inside a function counts
as much as one at the top. A new module needs no entry here unless it opens a package.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ("controller", "schemas", "streaming")

# Libraries that touch Spark, Delta, Kafka or ZooKeeper: never imported by the core,
# which executors get alone (streaming.job.ship_core ships `controller` and `schemas`).
OUTSIDE_WORLD = ("streaming", "pyspark", "py4j", "delta", "deltalake", "kafka", "kazoo")

# The modules at the top of `controller` that an engine builds on; the others at the
# top (simulator, health, snapshot, divergence, parse) build on the engines.
CORE_BASE = {
    "controller.model",
    "controller.events",
    "controller.config",
    "controller.java_text",
    "controller.topic_configs",
    "controller.invariants",
    "controller.columns",
    "controller.memory",
}

# What each unit may import besides itself. A unit is a subpackage, or a module at the
# top of `controller`/`streaming`. `controller.*` means any module of the core.
ALLOWED: dict[str, set[str]] = {
    "controller.zk": CORE_BASE | {"schemas"},
    "controller.kraft": CORE_BASE | {"schemas"},
    "controller.replay": {"controller.*", "schemas"},
    "controller.plan": {"controller.*", "schemas"},
    "streaming.clients": {"controller.*"},
    "streaming.lake": {"controller.*", "schemas", "streaming.jars"},
    "streaming.local_clusters": {"controller.*", "streaming.jars", "streaming.clients"},
    "streaming.importers": {
        "controller.*",
        "schemas",
        "streaming.jars",
        "streaming.local_clusters",
    },
    "streaming.shadow": {
        "controller.*",
        "schemas",
        "streaming.clients",
        "streaming.importers",
        # the KRaft shadow's log reader: Kafka's jars and `java`, as the log importer's
        "streaming.jars",
        "streaming.local_clusters",
        "streaming.metrics",
    },
    "streaming.chaos": {
        "controller.*",
        "streaming.clients",
        # the live drivers and the soak: local clusters, the shadow's view, Kafka's jars
        "streaming.jars",
        "streaming.local_clusters",
        "streaming.shadow",
    },
    "streaming.insight": {"controller.*", "schemas", "streaming.lake", "streaming.pages"},
    "streaming.plan": {"controller.*", "schemas", "streaming.lake", "streaming.pages"},
    "streaming.job": {
        "controller.*",
        "schemas",
        "streaming.jars",
        "streaming.clients",
        "streaming.lake",
        "streaming.metrics",
    },
    "streaming.jars": set(),
    "streaming.metrics": set(),
    "streaming.pages": set(),
    "streaming.cli": {"controller.*"},  # the commands themselves: by name, when one runs
    "streaming.__main__": {"streaming.cli"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_modules() -> dict[str, Path]:
    return {
        module_name(path): path for top in SOURCE for path in sorted((ROOT / top).rglob("*.py"))
    }


MODULES = source_modules()


def imported(module: str, path: Path) -> Iterator[str]:
    """Every module `module` imports: `from a import b` names `a.b` when that is a module
    of the source, `a` otherwise."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield full if full in MODULES else base


def graph() -> dict[str, set[str]]:
    return {
        module: {name for name in imported(module, path) if name in MODULES and name != module}
        for module, path in MODULES.items()
    }


def unit(module: str) -> str:
    """The package a module belongs to for the layer rules."""
    parts = module.split(".")
    if parts[0] == "schemas":
        return "schemas"
    if len(parts) >= 3 or (len(parts) == 2 and (ROOT / parts[0] / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def unit_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for module, targets in edges.items():
        units.setdefault(unit(module), set()).update(
            unit(t) for t in targets if unit(t) != unit(module)
        )
    return units


def allowed(source: str, target: str) -> bool:
    rules = ALLOWED.get(source)
    if rules is None:
        return True  # a module at the top of `controller` or `schemas`: the core's own rules
    return target in rules or (target.startswith("controller") and "controller.*" in rules)


def test_the_source_is_found() -> None:
    # a walk that found nothing would pass every test below
    assert {"controller.simulator", "controller.zk.context", "streaming.cli"} <= set(MODULES)
    assert len(MODULES) > 80
    assert "controller.zk.context" in graph()["controller.simulator"]


def test_no_import_cycle_between_modules() -> None:
    found = cycles(graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_between_packages() -> None:
    found = cycles(unit_graph(graph()))
    assert found == [], "package cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_core_never_imports_spark_delta_kafka_zookeeper_or_streaming() -> None:
    bad = [
        f"{module} imports {name}"
        for module, path in MODULES.items()
        if module.split(".")[0] in ("controller", "schemas")
        for name in imported(module, path)
        if name.split(".")[0] in OUTSIDE_WORLD
    ]
    assert bad == [], "; ".join(bad)


def test_every_arrow_between_packages_is_allowed() -> None:
    bad = [
        f"{source} -> {target}"
        for source, targets in sorted(unit_graph(graph()).items())
        for target in sorted(targets)
        if not allowed(source, target)
    ]
    assert bad == [], "arrows not in ALLOWED: " + "; ".join(bad)


def test_every_streaming_package_has_a_rule() -> None:
    # a new package must say what it may import (here and in its docstring)
    units = {unit(m) for m in MODULES if m.startswith("streaming.") or m.startswith("controller.")}
    packages = {u for u in units if (ROOT / u.replace(".", "/")).is_dir()}
    assert packages - set(ALLOWED) == set()


def test_every_package_says_what_lives_there() -> None:
    missing = [
        name
        for name, path in MODULES.items()
        if path.name == "__init__.py"
        and name != "schemas"
        and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert missing == []


@pytest.mark.parametrize("command", sorted(__import__("streaming.cli").cli.COMMANDS))
def test_every_command_module_exists(command: str) -> None:
    # the CLI names its commands' modules as strings, which an import walk cannot see
    from streaming.cli import COMMANDS

    module = COMMANDS[command].module
    assert module in MODULES
    names = {
        node.name
        for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef)
    }
    assert {"configure", "main"} <= names
