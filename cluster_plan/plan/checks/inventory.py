"""The plan as an Ansible inventory: host and group names that would clash there."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.inventory_groups import RESERVED_GROUPS, memberships
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.roles import ALL_ROLES
from cluster_plan.plan.topology import normalize, rack_switches, switch_path


def _groups(plan: Plan, nodes: list[Node]) -> dict[str, dict[str, str]]:
    """Ansible group -> {what stands for it: a node group that brings it}."""
    topo = normalize(plan["topology"])
    served = rack_switches(topo)
    made: dict[str, dict[str, str]] = defaultdict(dict)
    for node in nodes:
        access = served.get(node.rack or "", [None])[0]
        aggregation = None
        if access and topo["access"][access]["uplink"] in topo["aggregation"]:
            aggregation = switch_path(topo, access)["aggregation_switch"]
        for group, meaning in memberships(node, plan, access, aggregation):
            made[group].setdefault(meaning, node.group)
    return made


def check_inventory(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    made = _groups(plan, nodes)
    for group, meanings in sorted(made.items()):
        if len(meanings) > 1:
            first, second = sorted(meanings)[:2]
            yield Finding(
                "inventory-group-clash",
                f"{first} and {second} both become the Ansible group {group!r}, which would "
                "merge them",
                ("node_groups", meanings[second]),
                hint="Ansible group names turn '-' into '_': rename one of them",
            )
    taken = {*made, *RESERVED_GROUPS, *ALL_ROLES}
    clashing: dict[str, list[str]] = defaultdict(list)  # one finding per node group
    for node in nodes:
        if node.name in taken and node.name not in clashing[node.group]:
            clashing[node.group].append(node.name)
    for group, names in clashing.items():
        if not names:
            continue
        what = ", ".join(
            f"{name} ({'a role' if name in ALL_ROLES else 'a group Ansible or the plan makes'})"
            for name in names[:3]
        )
        yield Finding(
            "hostname-is-group",
            f"host name {what} is also an Ansible group name; ansible-inventory fails with "
            '"can\'t add group to itself"',
            ("node_groups", group, "hostname"),
            hint="give the hosts a pattern with {n}, e.g. " + f"{names[0]}{{n:02d}}",
        )
