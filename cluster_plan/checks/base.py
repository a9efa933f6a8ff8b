"""What every check is: a function of the plan and its nodes that yields findings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cluster_plan.findings import Finding
from cluster_plan.nodes import Node

Plan = dict[str, Any]
Check = Callable[[Plan, list[Node]], Iterator[Finding]]
MAX_NODES = 100_000
