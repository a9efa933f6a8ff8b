"""Cyclomatic complexity as radon counts it (boolean operators and comprehension branches
included, which the lint gate's mccabe count misses), over the production code.

No function may exceed LIMIT. The functions that still do are listed, with their figure, in
tests/complexity-allowed.json: a listed function may shrink, never grow, and one that falls to
LIMIT or below must leave the list, so the list only gets shorter (issue 26).

    python tests/complexity.py            # exit 1 and one line per problem
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = ROOT / "tests" / "complexity-allowed.json"
LIMIT = 15
# What ships: the package, the Ansible plugins, and the programs roles copy to hosts.
SOURCES = ("cluster_plan", "plugins", "roles")


def production_files(root: Path = ROOT) -> list[Path]:
    files = [p for folder in SOURCES for p in (root / folder).rglob("*.py")]
    return sorted(p for p in files if "__pycache__" not in p.parts)


def _blocks(path: Path) -> Iterator[Function]:
    for block in cc_visit(path.read_text()):
        if isinstance(block, Class):
            yield from block.methods
        else:
            yield block


def measure(root: Path = ROOT) -> dict[str, int]:
    """'path::name' (name with its class) -> complexity, for every function over LIMIT."""
    over = {}
    for path in production_files(root):
        for block in _blocks(path):
            if block.complexity > LIMIT:
                over[f"{path.relative_to(root)}::{block.fullname}"] = block.complexity
    return over


def problems(over: dict[str, int], allowed: dict[str, int]) -> list[str]:
    """Where the code and the allowance disagree: a new function over the limit, a listed one
    that grew, or a listed one that is no longer over it (remove it from the list)."""
    found = []
    for name, figure in sorted(over.items()):
        if name not in allowed:
            found.append(f"{name}: complexity {figure}, over {LIMIT}: split it into named steps")
        elif figure > allowed[name]:
            found.append(f"{name}: complexity {figure}, grew from {allowed[name]}")
    for name in sorted(set(allowed) - set(over)):
        found.append(f"{name}: no longer over {LIMIT} (or gone): remove it from {ALLOWED.name}")
    return found


def main() -> int:
    allowed = json.loads(ALLOWED.read_text())
    found = problems(measure(), allowed)
    for line in found:
        print(line)
    print(
        f"complexity: {len(allowed)} functions still over {LIMIT} (listed), {len(found)} problems"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
