"""The package's layers, held: which part of cluster_plan may import which (docs/ARCHITECTURE.md,
"The layers"). Every import counts, at the top of a module or inside a function.

    the core      plan/                       imports nothing of the package outside plan/
    the base      api, output_files, page/,   the core and each other: what every part may use
                  cli.policy, cli.envelope,   (the CLI's exit policy and JSON envelope; the
                  node_bundle                 zips of the programs the nodes run)
    the parts     views/ and the subsystems   the core, the base, and another part only where
                                              ALLOWED says so, and why
    the shell     cli/ (the rest), __main__,  anything: nothing imports them but each other
                  reference_docs

    python tests/import_contract.py     # exit 1 and one line per import against the contract
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = "plan"
BASE = frozenset({"api", "output_files", "page", "cli.policy", "cli.envelope", "node_bundle"})
SHELL = frozenset({"cli", "__main__", "reference_docs"})
# (part, the part it imports): why it may.
ALLOWED = {
    ("acceptance", "collectives"): "reads what the collectives program prints on the nodes",
    ("acceptance", "slurm"): "runs the collectives job through Slurm's commands",
    ("acceptance", "storage"): "judges Ceph through its commands' builders and parsers",
    ("acceptance", "kubernetes"): "runs the plan's training Job through the API server",
    ("acceptance", "transport"): "reaches nodes through the transport's executors",
    ("backup", "day2"): "asks the nodes through day 2's read-only sessions",
    ("backup", "transport"): "the same SSH options as every command that reaches nodes",
    ("day2", "kubernetes"): "cordons through the one drain's Kubernetes side",
    ("day2", "lab"): "reaches the lab's nodes",
    ("day2", "slurm"): "drains through the one Slurm drain",
    ("day2", "storage"): "a change waits for Ceph's health through its commands",
    ("day2", "transport"): "reaches nodes through the transport's executors",
    ("day2", "views"): "a change is the diff of two plans",
    ("exporters", "acceptance"): "the state collector reads the acceptance history",
    ("exporters", "monitoring"): "the collectors write the metrics of the monitoring's table",
    ("exporters", "slurm"): "the Slurm collector reads scontrol through the Slurm commands",
    ("kubernetes", "lab"): "what a lab's namespace nodes need of kubelet and containerd",
    ("kubernetes", "monitoring"): "prometheus-operator objects carry the alert rules",
    ("kubernetes", "slurm"): "a cordon records its owner as the one Slurm drain does",
    ("kubernetes", "views"): "k8s render writes its folder as every rendering does",
    ("lab", "monitoring"): "a node image holds the packages the roles choose from the plan",
    ("lab", "software"): "a node image holds the packages the roles choose from the plan",
    ("lab", "storage"): "a node image holds the packages the roles choose from the plan",
    ("monitoring", "views"): "monitoring render writes its folder as every rendering does",
    ("network", "monitoring"): "the firewall opens node_exporter's port to the monitoring host",
    ("teams", "slurm"): "a team is a Slurm account with its QOS",
    ("transport", "lab"): "the lab's executor runs commands inside the lab's nodes",
}


def part_of(module: str) -> str:
    """The part a module of the package belongs to: its first name under cluster_plan, or
    cli.policy and cli.envelope, which are the base."""
    names = module.split(".")[1:]
    if not names:
        return "__init__"
    if names[0] == "cli" and len(names) > 1 and f"cli.{names[1]}" in BASE:
        return f"cli.{names[1]}"
    return names[0]


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of the package in a file; `from cluster_plan.cli import
    policy` is an import of cluster_plan.cli.policy (the base), not of the CLI."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("cluster_plan"):
                continue
            for alias in node.names:
                named = f"{node.module}.{alias.name}"
                yield node.lineno, named if part_of(named) in BASE else node.module
        elif isinstance(node, ast.Import):
            yield from (
                (node.lineno, a.name) for a in node.names if a.name.startswith("cluster_plan")
            )


def allowed(source: str, target: str) -> bool:
    if source == target or target == "__init__":
        return True
    if source == CORE:
        return False
    if target == CORE:
        return True
    if source in BASE:
        return target in BASE
    if source in SHELL:
        return True
    return target in BASE or (source, target) in ALLOWED


def violations(root: Path = ROOT) -> list[str]:
    package = root / "cluster_plan"
    found = []
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        source = part_of(module)
        for line, target_module in imports(path):
            target = part_of(target_module)
            if not allowed(source, target):
                found.append(
                    f"{path.relative_to(root)}:{line}: {source} imports {target} "
                    f"({target_module}): against the layers (tests/import_contract.py)"
                )
    return found


def unused_allowances(root: Path = ROOT) -> list[str]:
    """ALLOWED entries no import needs any more: the contract keeps to what the code does."""
    used = set()
    for path in sorted((root / "cluster_plan").rglob("*.py")):
        source = part_of(".".join(path.relative_to(root).with_suffix("").parts))
        used |= {(source, part_of(m)) for _, m in imports(path)}
    return [f"ALLOWED{pair}: no import needs it" for pair in sorted(set(ALLOWED) - used)]


def _modules(root: Path) -> dict[str, Path]:
    package = root / "cluster_plan"
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _edges(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules a file imports (`from a import b` is a.b when b is a module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                out.add(name if name in modules else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m in modules}


def cycles(root: Path = ROOT) -> list[str]:
    """Modules that import each other, directly or round a loop (an import inside a function
    too: putting it there hides a cycle, it does not remove it)."""
    modules = _modules(root)
    graph = {name: _edges(path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append("import cycle: " + " <-> ".join(sorted(members)))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def main() -> int:
    found = violations() + unused_allowances() + cycles()
    for line in found:
        print(line)
    print(f"import contract: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
