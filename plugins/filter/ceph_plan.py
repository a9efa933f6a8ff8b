"""Ansible filters for the Ceph role (and the mount unit names the NFS and Slurm roles use
too): the plan-to-Ceph mapping of cluster_plan.storage.ceph and cluster_plan.storage.mounts
(pure functions over the expanded plan, unit-tested there). This only adapts."""

from __future__ import annotations

from typing import Any

from cluster_plan.storage import ceph, mounts


class FilterModule:
    """Ansible filters; see each function's docstring in cluster_plan.storage.ceph."""

    def filters(self) -> dict[str, Any]:
        return {
            "ceph_networks": ceph.ceph_networks,
            "ceph_cidr": ceph.ceph_cidr,
            "ceph_address": ceph.ceph_address,
            "ceph_mon_addrs": ceph.ceph_mon_addrs,
            "ceph_osd_disks": ceph.ceph_osd_disks,
            "ceph_zap_allowed": ceph.ceph_zap_allowed,
            "ceph_memory": ceph.ceph_memory,
            "ceph_crush_rules": ceph.ceph_crush_rules,
            "ceph_pools": ceph.ceph_pools,
            "ceph_crush_tree": ceph.ceph_crush_tree,
            "ceph_crush_location": ceph.ceph_crush_location,
            "ceph_cephfs": ceph.ceph_cephfs,
            "ceph_cephfs_clients": ceph.ceph_cephfs_clients,
            "ceph_dataset_volumes": ceph.ceph_dataset_volumes,
            "ceph_client_caps": ceph.ceph_client_caps,
            "ceph_nfs_groups": ceph.ceph_nfs_groups,
            "ceph_nfs_caps": ceph.ceph_nfs_caps,
            "ceph_config_options": ceph.ceph_config_options,
            "systemd_mount_unit": mounts.systemd_mount_unit,
        }
