"""Ceph pools as Ceph itself judges them: what the monitors refuse (a single replica, a CephFS
on pools of another application, data in the CephFS metadata pool) and what they warn about
(a pg_num that is not a power of two while the autoscaler is off)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node


def check_ceph_pools(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    ceph = (plan.get("storage") or {}).get("ceph") or {}
    pools = [p for p in ceph.get("pools") or [] if isinstance(p, dict)]
    for i, pool in enumerate(pools):
        yield from _pool(pool, ("storage", "ceph", "pools", i))
    cephfs = ceph.get("cephfs")
    if isinstance(cephfs, dict):
        yield from _cephfs_pools(cephfs, pools)
        yield from _datasets_on_metadata(plan, cephfs)


def _pool(pool: dict[str, Any], path: tuple[Any, ...]) -> Iterator[Finding]:
    name = pool.get("name")
    if pool.get("size") == 1:
        yield Finding(
            "ceph-pool-size",
            f"pool {name} keeps a single copy: Ceph refuses size 1 (mon_allow_pool_size_one "
            "and --yes-i-really-mean-it), and one lost disk would lose its data",
            (*path, "size"),
            hint="use size 2 or more (3 in production)",
        )
    pg_num = pool.get("pg_num")
    if pool.get("autoscale") == "off" and isinstance(pg_num, int) and pg_num & (pg_num - 1):
        below = 1 << (pg_num.bit_length() - 1)
        yield Finding(
            "ceph-pg-num",
            f"pool {name} has pg_num {pg_num}, not a power of two, with the autoscaler off: "
            "placement groups differ in size and Ceph warns (POOL_PG_NUM_NOT_POWER_OF_TWO)",
            (*path, "pg_num"),
            severity="warning",
            hint=f"use {below} or {below * 2}, or autoscale: on",
        )


def _cephfs_pools(cephfs: dict[str, Any], pools: list[dict[str, Any]]) -> Iterator[Finding]:
    """`ceph fs new` refuses pools that carry another application (rbd, the default)."""
    index = {p.get("name"): i for i, p in enumerate(pools)}
    for key in ("metadata_pool", "data_pool"):
        name = cephfs.get(key)
        if name not in index:
            continue  # an unknown pool is reported as such
        pool = pools[index[name]]
        application = pool.get("application", "rbd")
        if application != "cephfs":
            yield Finding(
                "ceph-pool-application",
                f"pool {name} is the CephFS {key.replace('_', ' ')}, but its application is "
                f"{application}: `ceph fs new` refuses a pool of another application",
                ("storage", "ceph", "pools", index[name], "application"),
                hint="set application: cephfs on the pool",
            )


def _datasets_on_metadata(plan: Plan, cephfs: dict[str, Any]) -> Iterator[Finding]:
    """The metadata pool holds the MDS's journal and directories; file data in it competes
    with every metadata operation of the file system (the MDS refuses it as a data pool)."""
    metadata = cephfs.get("metadata_pool")
    datasets = (plan.get("scheduler") or {}).get("datasets") or {}
    for name, dataset in datasets.items():
        if isinstance(dataset, dict) and metadata and dataset.get("pool") == metadata:
            yield Finding(
                "ceph-dataset-pool",
                f"dataset {name} is on pool {metadata}, the CephFS metadata pool: file data "
                "cannot live there",
                ("scheduler", "datasets", name, "pool"),
                hint="give the dataset a pool of its own (application: cephfs)",
            )
