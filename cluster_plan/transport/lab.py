"""Commands into the running lab's nodes (cluster_plan.lab's names and state): through
`nsenter` into each node's namespaces (the node's own tools), or `ip netns exec` into its
network namespace alone (this machine's tools)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cluster_plan.cli.policy import CommandError
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.transport.execution import CommandResult, PrefixExecutor, Running


class LabNotUp(CommandError):
    """No node of the plan's lab can be reached (exit 1): the lab is not up."""


def lab_prefixes(expanded: ExpandedPlan, transport: str) -> dict[str, list[str]]:
    """Per-node command prefixes into a running lab: `lab` (nsenter) or `lab-netns`."""
    from cluster_plan.lab import state
    from cluster_plan.lab.names import for_plan
    from cluster_plan.lab.node import nsenter

    names = for_plan(expanded)
    if transport == "lab-netns":
        prefixes = {
            host: ["ip", "netns", "exec", names.node_ns(host)]
            for host in expanded["hosts"]
            if Path("/run/netns", names.node_ns(host)).exists()
        }
    else:
        lab = state.load(names.state_file)
        nodes = lab.nodes.items() if lab else []
        prefixes = {host: nsenter(ref, []) for host, ref in nodes if ref.alive()}
    if not prefixes:
        raise LabNotUp(f"the lab {names.lab} is not up (cluster-plan lab up PLAN)")
    # a node that is down is in no prefix: its measurements fail, it is never run here
    return prefixes


class LabExecutor:
    """Commands into the lab's nodes, looked up at each call: during a `change` nodes come,
    go and reboot."""

    def __init__(self, plan: ExpandedPlan) -> None:
        self._plan = plan

    def _current(self) -> PrefixExecutor:
        return PrefixExecutor(per_node=lab_prefixes(self._plan, "lab"))

    def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        return self._current().run(node, argv, timeout)

    def spawn(self, node: str, argv: Sequence[str]) -> Running:
        return self._current().spawn(node, argv)
