"""Checks kavka's layering: every import points down the layer list, and no package cycle.

Run it from the repository root: `python scripts/check_layers.py` (exit 0: clean; 1: it lists
each import that points up a layer, with file and line). `--graph` prints the package graph.

A package's layer is its place in LAYERS (bottom first); packages on one line of LAYERS are on
one layer and must not import each other both ways. Imports under `if TYPE_CHECKING:` count too:
a type that must come from above is a sign the code sits in the wrong layer.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "kavka"

# Bottom first. A module may import its own package and any package on a lower line
# (faults.py: the broker's test-only fault switches, inert unless enabled; imports nothing of kavka).
LAYERS: list[tuple[str, ...]] = [
    ("common",),
    ("quota", "faults", "principal", "sasl", "certs", "authorizer"),
    ("scram", "oauthbearer"),  # SASL mechanisms: kavka.sasl's SaslServer
    ("protocol",),
    ("client",),
    ("storage",),
    ("raft",),
    ("metadata", "config"),
    ("tiered",),
    ("replication",),
    ("controller",),
    ("coordinator",),
    ("broker",),
    ("client_properties",),  # a Java client's security properties: borrows config's ssl.* parsing and broker.tls's SSLContext builder
    ("spark",),
    ("testing",),
    ("local_cluster",),
    ("demo",),
    ("operations",),  # cluster operations over the admin client, shared by the CLI and the console
    ("console",),  # the web console: the admin client, and the group-assignment decoder of coordinator
    ("cli",),
    ("__main__",),
]
RANK = {pkg: i for i, line in enumerate(LAYERS) for pkg in line}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "kavka" or len(parts) < 2:
        return None
    return parts[1]


def imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "kavka":
                out.extend((node.lineno, f"kavka.{a.name}") for a in node.names)
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return out


def main() -> int:
    problems: list[str] = []
    graph: dict[str, set[str]] = defaultdict(set)
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent)
        own = package_of(".".join(rel.with_suffix("").parts))
        if own is None or own not in RANK:
            if own is not None and own != "__init__":
                problems.append(f"{rel}: package {own!r} is not in LAYERS")
            continue
        for line, module in imports(path):
            other = package_of(module)
            if other is None or other == own or other == "__init__":
                continue
            graph[own].add(other)
            if other not in RANK:
                problems.append(f"{rel}:{line}: imports {module}, whose package is not in LAYERS")
            elif RANK[other] >= RANK[own]:
                problems.append(f"{rel}:{line}: {own} imports {module} ({other} is not below {own})")
    if "--graph" in sys.argv:
        for pkg in sorted(graph, key=lambda p: RANK.get(p, -1)):
            print(f"{pkg:14} -> {', '.join(sorted(graph[pkg], key=lambda p: RANK.get(p, -1)))}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} imports break the layering")
        return 1
    print(f"layering clean: {sum(len(v) for v in graph.values())} package dependencies, all pointing down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
