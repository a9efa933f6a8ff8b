"""The Ceph, NFS, teams, firewall, Kubernetes, monitoring and software filter plugins only
adapt: each filter name the roles use is the package function of that name (the decisions are
tested in test_ceph_plan.py, test_nfs_plan.py, test_slurm_teams.py, test_k8s_role_filters.py,
test_monitoring_role.py, test_software_role_view.py and through the rendered templates)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import ceph_plan
import common_firewall
import kubernetes_plan
import monitoring_plan
import nfs_plan
import pytest
import software_plan
import team_policy

from cluster_plan.kubernetes import role_view as kubernetes_view
from cluster_plan.monitoring import role_view as monitoring_view
from cluster_plan.network import firewall
from cluster_plan.software import role_view as software_view
from cluster_plan.storage import ceph, mounts, nfs
from cluster_plan.teams import policy

CEPH_FILTERS = [
    "ceph_networks",
    "ceph_cidr",
    "ceph_address",
    "ceph_mon_addrs",
    "ceph_osd_disks",
    "ceph_zap_allowed",
    "ceph_memory",
    "ceph_crush_rules",
    "ceph_pools",
    "ceph_crush_tree",
    "ceph_crush_location",
    "ceph_cephfs",
    "ceph_cephfs_clients",
    "ceph_dataset_volumes",
    "ceph_client_caps",
    "ceph_nfs_groups",
    "ceph_nfs_caps",
    "ceph_config_options",
]
TEAM_FILTERS = [
    "team_users",
    "slurm_minutes",
    "slurm_accounting_tres",
    "slurm_billing_weights",
    "slurm_decay_half_life",
    "slurm_qos_records",
    "slurm_account_records",
    "slurm_user_records",
    "slurm_team_policy",
]
ADAPTERS: list[tuple[ModuleType, dict[str, ModuleType]]] = [
    (ceph_plan, {**dict.fromkeys(CEPH_FILTERS, ceph), "systemd_mount_unit": mounts}),
    (nfs_plan, dict.fromkeys(["nfs_exports", "nfs_client_mounts"], nfs)),
    (team_policy, dict.fromkeys(TEAM_FILTERS, policy)),
    (common_firewall, {"common_restricted_services": firewall}),
    (
        kubernetes_plan,
        dict.fromkeys(
            [
                "kubernetes_rendering",
                "kubernetes_runtime",
                "kubernetes_mirror_files",
                "kubernetes_mirror_images",
                "kubernetes_host_routes",
                "kubernetes_calico_manifest",
            ],
            kubernetes_view,
        ),
    ),
    (monitoring_plan, dict.fromkeys(["monitoring_rendering", "monitoring_gpus"], monitoring_view)),
    (
        software_plan,
        dict.fromkeys(
            [
                "software_in_image",
                "software_host_builds",
                "software_packages",
                "software_pip_builds",
                "software_modules",
                "software_pip_installs",
            ],
            software_view,
        ),
    ),
]


@pytest.mark.parametrize(
    ("plugin", "homes"), ADAPTERS, ids=[plugin.__name__ for plugin, _ in ADAPTERS]
)
def test_each_filter_is_the_package_function_of_its_name(
    plugin: ModuleType, homes: dict[str, ModuleType]
) -> None:
    filters: dict[str, Any] = plugin.FilterModule().filters()
    assert sorted(filters) == sorted(homes)
    for name, function in filters.items():
        assert function is getattr(homes[name], name), name
