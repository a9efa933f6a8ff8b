"""What every check is: a function of the plan and its nodes that yields findings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

Plan = dict[str, Any]
Check = Callable[[Plan, list[Node]], Iterator[Finding]]
MAX_NODES = 100_000


def first_names(names: list[str], shown: int = 3) -> str:
    """The first few names of a list a finding is about, and "..." when there are more:
    a message names examples, not every one of thousands of hosts."""
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
