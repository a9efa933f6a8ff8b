"""Turn the expanded plan into the records Slurm's configuration files are printed from.

The collection's filter plugin `slurm_policy` serves these to the slurm role's templates;
`cluster-plan drift` compares Slurm's own view of its nodes with the same records.

Pure functions over plain dicts (the `cluster_plan` group variable and the `plan_host` of
each compute node): the templates only print what these return, so the scheduling policy
(which node carries which features, which partition a workload class maps to, which
switch a node hangs under) is decided here, in one place, and unit-tested offline.
"""

from __future__ import annotations

import re
from typing import Any

Host = dict[str, Any]
Plan = dict[str, Any]

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def slurm_name(text: str) -> str:
    """A Slurm-safe feature, partition or switch name."""
    return _UNSAFE.sub("_", str(text))


def pool_feature(pool: str) -> str:
    return f"pool_{slurm_name(pool)}"


def rack_feature(rack: str) -> str:
    return f"rack_{slurm_name(rack)}"


def dataset_feature(dataset: str) -> str:
    return f"dataset_{slurm_name(dataset)}"


def gres_name(accelerators: dict[str, Any]) -> tuple[str, str | None]:
    """(gres name, gres type): NVIDIA GPUs are `gpu:<type>`, other accelerators `<type>`."""
    gres_type = slurm_name(accelerators["gres_type"])
    if accelerators.get("kind") == "gpu" or accelerators.get("vendor") == "nvidia":
        return "gpu", gres_type
    return gres_type, None


def node_features(host: Host) -> list[str]:
    features: list[str] = []
    if host.get("pool"):
        features.append(pool_feature(host["pool"]))
    accelerators = host.get("accelerators")
    if accelerators:
        features.append(slurm_name(accelerators["gres_type"]))
    if host.get("rack"):
        features.append(rack_feature(host["rack"]))
    features.extend(dataset_feature(d) for d in host.get("datasets") or [])
    return features


def node_weight(host: Host) -> int:
    """Lower weight is allocated first: plain nodes before accelerator nodes, so work that
    lands in a mixed partition leaves the expensive nodes free for work that needs them."""
    accelerators = host.get("accelerators")
    if not accelerators:
        return 1
    return 10 + int(accelerators.get("count", 0))


def slurm_node_records(hosts: list[Host], memory_fraction: float = 0.95) -> list[dict[str, Any]]:
    """One NodeName record per compute node.

    RealMemory keeps `1 - memory_fraction` of the plan's memory for the OS so that a node
    whose firmware reserves some memory is not drained for "Low RealMemory".
    """
    records = []
    for host in hosts:
        accelerators = host.get("accelerators")
        gres = None
        if accelerators and accelerators.get("count"):
            name, gtype = gres_name(accelerators)
            gres = (
                f"{name}:{gtype}:{accelerators['count']}"
                if gtype
                else (f"{name}:{accelerators['count']}")
            )
        records.append(
            {
                "name": host["hostname"],
                "addr": host["address"],
                "cpus": int(host["cpu_cores"]),
                "real_memory": int(float(host["memory_gb"]) * 1024 * memory_fraction),
                "gres": gres,
                "features": node_features(host),
                "weight": node_weight(host),
            }
        )
    return records


def slurm_gres_types(hosts: list[Host]) -> list[str]:
    names = {gres_name(h["accelerators"])[0] for h in hosts if h.get("accelerators")}
    return sorted(names)


def slurm_gres_records(hosts: list[Host]) -> list[dict[str, Any]]:
    """gres.conf lines. NVIDIA GPUs get `File=/dev/nvidia[0-N]` so that Slurm binds devices and
    sets CUDA_VISIBLE_DEVICES; generic accelerators are counted only (no device path is known)."""
    records = []
    for host in hosts:
        accelerators = host.get("accelerators")
        if not accelerators or not accelerators.get("count"):
            continue
        count = int(accelerators["count"])
        name, gtype = gres_name(accelerators)
        record: dict[str, Any] = {
            "node": host["hostname"],
            "name": name,
            "type": gtype,
            "count": count,
            "file": None,
        }
        if name == "gpu":
            record["file"] = "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"
        records.append(record)
    return records


def _class_hosts(hosts: list[Host], workload_class: dict[str, Any]) -> list[Host]:
    return [h for h in hosts if h.get("pool") == workload_class.get("pool")]


def slurm_partition_records(plan: Plan, hosts: list[Host]) -> list[dict[str, Any]]:
    """One partition per workload class over the compute nodes of its pool.

    A class whose pool has no node yet still gets a partition (State=INACTIVE with no
    nodes is not valid Slurm, so it is left out and reported by `slurm_empty_classes`).
    """
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    default = _default_class(classes)
    records = []
    for name, spec in classes.items():
        members = _class_hosts(hosts, spec)
        if not members:
            continue
        records.append(
            {
                "name": slurm_name(name),
                "nodes": [h["hostname"] for h in members],
                "default": name == default,
                "pool": spec.get("pool"),
                "description": spec.get("description", ""),
            }
        )
    return records


def slurm_empty_classes(plan: Plan, hosts: list[Host]) -> list[str]:
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    return [name for name, spec in classes.items() if not _class_hosts(hosts, spec)]


def _default_class(classes: dict[str, Any]) -> str | None:
    for name, spec in classes.items():
        if spec.get("default"):
            return str(name)
    for name, spec in classes.items():
        if spec.get("needs") == "cpu":
            return str(name)
    return next(iter(classes), None)


def slurm_switch_records(plan: Plan, hosts: list[Host]) -> list[dict[str, Any]]:
    """topology.conf from the plan's core -> aggregation -> access tree.

    Only switches with compute nodes below them are written (Slurm rejects a switch with
    neither nodes nor child switches). topology/tree needs a tree: an aggregation switch
    with several core uplinks is placed under its first one.
    """
    topology = plan.get("topology") or {}
    by_access: dict[str, list[str]] = {}
    for host in hosts:
        if host.get("access_switch"):
            by_access.setdefault(host["access_switch"], []).append(host["hostname"])
    access = topology.get("access") or {}
    aggregation = topology.get("aggregation") or {}
    records: list[dict[str, Any]] = [
        {"name": slurm_name(name), "nodes": by_access[name], "switches": []}
        for name in access
        if by_access.get(name)
    ]
    live_access = {str(r["name"]) for r in records}
    uplink = {a: spec.get("uplink") for a, spec in access.items()}
    middle = _parent_records(aggregation, uplink, live_access)
    # an aggregation switch with several core uplinks goes under its first (a tree)
    first_uplink = {a: (spec.get("uplinks") or [None])[0] for a, spec in aggregation.items()}
    top = _parent_records(
        topology.get("core") or {}, first_uplink, {str(r["name"]) for r in middle}
    )
    return records + middle + top


def _parent_records(
    switches: dict[str, Any], uplink_of: dict[str, Any], live: set[str]
) -> list[dict[str, Any]]:
    """The switches of one tier that have a live switch (one with nodes below it) under them."""
    records = []
    for name in switches:
        children = [
            slurm_name(c) for c, up in uplink_of.items() if up == name and slurm_name(c) in live
        ]
        if children:
            records.append({"name": slurm_name(name), "nodes": [], "switches": children})
    return records


def slurm_submit_policy(plan: Plan, hosts: list[Host]) -> dict[str, Any]:
    """The data job_submit.lua routes by.

    - `classes`: workload class -> partition;
    - `gres_classes`: gres name a job may ask for (gpu, tpu) -> the class that serves it,
      taken from the classes' `needs` and the accelerators of their pools;
    - `datasets`: dataset -> the feature of the nodes holding it, and the partitions where
      such nodes exist (a preference elsewhere could never be met, so it is not set).
    """
    scheduler = plan.get("scheduler") or {}
    classes = scheduler.get("workload_classes") or {}
    partitions = {p["name"]: p for p in slurm_partition_records(plan, hosts)}

    policy_classes = {}
    gres_classes: dict[str, str] = {}
    for name, spec in classes.items():
        if slurm_name(name) not in partitions:
            continue
        policy_classes[str(name)] = {"partition": slurm_name(name), "needs": spec.get("needs")}
        if spec.get("needs") in ("gpu", "accelerator"):
            for gres in slurm_gres_types(_class_hosts(hosts, spec)):
                gres_classes.setdefault(gres, str(name))

    datasets = {
        str(dataset): _dataset_policy(dataset, hosts, partitions)
        for dataset in scheduler.get("datasets") or {}
    }
    default = _default_class({k: v for k, v in classes.items() if str(k) in policy_classes})
    return {
        "classes": policy_classes,
        "default_class": default,
        "gres_classes": dict(sorted(gres_classes.items())),
        "datasets": datasets,
    }


def _dataset_policy(dataset: Any, hosts: list[Host], partitions: dict[str, Any]) -> dict[str, Any]:
    """The feature of the nodes holding the dataset, and the partitions that have such nodes."""
    holders = {h["hostname"] for h in hosts if dataset in (h.get("datasets") or [])}
    where = sorted(p for p, record in partitions.items() if holders.intersection(record["nodes"]))
    return {"feature": dataset_feature(dataset), "partitions": where}


def lua_string(value: Any) -> str:
    """A Lua string literal (the names printed are Slurm-safe already; this guards quotes)."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    # every control character as a decimal escape: a raw newline or CR ends a Lua string
    text = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\{ord(m.group()):03d}", text)
    return f'"{text}"'
