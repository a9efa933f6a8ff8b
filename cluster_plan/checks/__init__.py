"""Semantic checks: what JSON Schema cannot say about a plan, one module per domain.

Each check is a function ``(plan, nodes) -> findings``; validate.py runs them all on a plan
that loaded, and drops a check's crash only when the schema already found errors.
"""

from __future__ import annotations

from cluster_plan.checks.acceptance import check_acceptance
from cluster_plan.checks.base import MAX_NODES, Check, Plan
from cluster_plan.checks.hardware import check_accelerators
from cluster_plan.checks.inventory import check_inventory
from cluster_plan.checks.networks import check_capacity, check_networks
from cluster_plan.checks.nodes import check_nodes
from cluster_plan.checks.references import check_references
from cluster_plan.checks.scheduler import check_scheduler
from cluster_plan.checks.storage import check_ceph
from cluster_plan.checks.teams import check_teams
from cluster_plan.checks.topology import check_topology

ALL_CHECKS: tuple[Check, ...] = (
    check_networks,
    check_capacity,
    check_nodes,
    check_references,
    check_topology,
    check_accelerators,
    check_scheduler,
    check_teams,
    check_ceph,
    check_acceptance,
    check_inventory,
)

__all__ = ["ALL_CHECKS", "MAX_NODES", "Check", "Plan"]
