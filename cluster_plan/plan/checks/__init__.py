"""Semantic checks: what JSON Schema cannot say about a plan, one module per domain.

Each check is a function ``(plan, nodes) -> findings``; validate.py runs them all on a plan
that loaded, and drops a check's crash only when the schema already found errors.
"""

from __future__ import annotations

from cluster_plan.plan.checks.acceptance import check_acceptance
from cluster_plan.plan.checks.accounts import check_accounts
from cluster_plan.plan.checks.alerts import check_alerts
from cluster_plan.plan.checks.backups import check_backup_copies
from cluster_plan.plan.checks.base import MAX_NODES, Check, Plan
from cluster_plan.plan.checks.ceph_hosts import check_ceph_hosts
from cluster_plan.plan.checks.cluster import (
    check_admin_users,
    check_cluster,
    check_time_reference,
)
from cluster_plan.plan.checks.collectives import check_collectives
from cluster_plan.plan.checks.fitness import check_fitness, check_team_pools
from cluster_plan.plan.checks.grammar import (
    check_calendars,
    check_reserved_hostnames,
    check_ssh_keys,
)
from cluster_plan.plan.checks.hardware import check_accelerators, check_disks
from cluster_plan.plan.checks.history import check_history_database
from cluster_plan.plan.checks.interfaces import check_interfaces
from cluster_plan.plan.checks.inventory import check_inventory
from cluster_plan.plan.checks.kubernetes import check_kubernetes
from cluster_plan.plan.checks.monitoring import check_monitoring
from cluster_plan.plan.checks.mounts import check_mounts
from cluster_plan.plan.checks.networks import (
    check_capacity,
    check_networks,
    check_service_addresses,
)
from cluster_plan.plan.checks.nodes import check_nodes
from cluster_plan.plan.checks.pools import check_ceph_pools
from cluster_plan.plan.checks.power import check_power_units, check_rack_power
from cluster_plan.plan.checks.references import check_references
from cluster_plan.plan.checks.reservations import check_reservations
from cluster_plan.plan.checks.scheduler import check_scheduler
from cluster_plan.plan.checks.services import check_backups, check_nfs_service
from cluster_plan.plan.checks.software import check_software
from cluster_plan.plan.checks.software_places import check_software_places
from cluster_plan.plan.checks.storage import check_ceph, check_nfs_backends
from cluster_plan.plan.checks.teams import check_teams
from cluster_plan.plan.checks.topology import check_topology
from cluster_plan.plan.checks.workload import check_datasets, check_workload_classes

ALL_CHECKS: tuple[Check, ...] = (
    check_cluster,
    check_time_reference,
    check_networks,
    check_capacity,
    check_service_addresses,
    check_nodes,
    check_references,
    check_topology,
    check_accelerators,
    check_disks,
    check_interfaces,
    check_scheduler,
    check_kubernetes,
    check_reservations,
    check_workload_classes,
    check_datasets,
    check_teams,
    check_accounts,
    check_team_pools,
    check_rack_power,
    check_power_units,
    check_fitness,
    check_ceph,
    check_ceph_pools,
    check_ceph_hosts,
    check_mounts,
    check_nfs_backends,
    check_nfs_service,
    check_backups,
    check_backup_copies,
    check_admin_users,
    check_ssh_keys,
    check_calendars,
    check_reserved_hostnames,
    check_acceptance,
    check_collectives,
    check_history_database,
    check_monitoring,
    check_alerts,
    check_software,
    check_software_places,
    check_inventory,
)

__all__ = ["ALL_CHECKS", "MAX_NODES", "Check", "Plan"]
