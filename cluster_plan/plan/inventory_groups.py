"""The Ansible groups a plan makes, and what each stands for.

expand() puts hosts in these groups; checks/inventory.py refuses plans whose names clash
in Ansible (a host named like a group; two plan names made into one group name).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.nodes import Node

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
# Groups Ansible makes itself, and the fixed groups of the plugin: a host may not take them.
RESERVED_GROUPS = ("all", "ungrouped", "gpu", "accelerator")


@cache
def group_name(*parts: str) -> str:
    """An Ansible-safe group name: `rack-1` -> `rack_rack_1`."""
    return _UNSAFE.sub("_", "_".join(parts))


def memberships(
    node: Node, plan: dict[str, Any], access: str | None, aggregation: str | None
) -> Iterator[tuple[str, str]]:
    """(group, what it stands for) for every group the node is in."""
    for role in node.roles:
        yield role, f"role {role}"
    yield group_name("nodes", node.group), f"node group {node.group}"
    yield group_name("hw", node.hardware), f"hardware profile {node.hardware}"
    if node.rack:
        yield group_name("rack", node.rack), f"rack {node.rack}"
    if access:
        yield group_name("access", access), f"access switch {access}"
    if aggregation:
        yield group_name("aggregation", aggregation), f"aggregation switch {aggregation}"
    if node.pool:
        yield group_name("pool", node.pool), f"pool {node.pool}"
    accel = (plan["hardware"].get(node.hardware) or {}).get("accelerators")
    entry = load_catalog().get(accel["model"]) if accel else None
    if entry:
        gpu = entry["vendor"] == "nvidia"
        prefix = "gpu" if gpu else "accel"
        yield group_name(prefix, entry["gres_type"]), f"accelerator type {entry['gres_type']}"
        yield (
            ("gpu" if gpu else "accelerator"),
            "every node with " + ("NVIDIA GPUs" if gpu else "accelerators"),
        )
