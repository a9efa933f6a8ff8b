"""Turn the expanded plan into what the Ceph role applies: networks, monitors, OSD disks,
the CRUSH tree and rules, pools, the CephFS and its clients.

Pure functions over plain dicts (the `cluster_plan` group variable and `plan_host` dicts),
which carry every plan default already (cluster_plan/plan/defaults.py): the tasks and templates
only apply what these return, so the plan-to-Ceph mapping is decided here, in one place, and
unit-tested offline (tests/roles/test_ceph_plan.py).
"""

from __future__ import annotations

from typing import Any

from cluster_plan.plan.host_values import in_grammar
from cluster_plan.plan.software import on_mount
from cluster_plan.storage.nfs import nfs_volume_group

Host = dict[str, Any]
Plan = dict[str, Any]


def _ceph(plan: Plan) -> dict[str, Any]:
    """The plan's `storage.ceph` section ({} without Ceph)."""
    return dict((plan.get("storage") or {}).get("ceph") or {})


def ceph_networks(plan: Plan) -> dict[str, str]:
    """Plan network names of Ceph's public and cluster networks ("" without Ceph)."""
    ceph = _ceph(plan)
    return {
        "public": str(ceph.get("public_network") or ""),
        "cluster": str(ceph.get("cluster_network") or ""),
    }


def ceph_cidr(plan: Plan, network: str) -> str:
    """The CIDR of a plan network ("" for none)."""
    return str(plan["networks"][network]["cidr"]) if network else ""


def ceph_address(host: Host, network: str) -> str:
    """A host's address on a plan network (hosts off that network cannot run Ceph)."""
    return str(host["interfaces"][network]["address"])


def ceph_mon_addrs(hosts: list[Host], network: str) -> list[str]:
    """mon_host entries: both messenger protocols of every monitor."""
    return [
        f"[v2:{ceph_address(h, network)}:3300,v1:{ceph_address(h, network)}:6789]" for h in hosts
    ]


def ceph_osd_disks(host: Host, device_prefix: str) -> list[dict[str, str]]:
    """The host's OSD disks: plan name and device (the plan's `device`, or the stable name
    under `device_prefix` that the lab gives its stand-in disks)."""
    return [
        {"name": str(d["name"]), "device": str(d.get("device") or f"{device_prefix}{d['name']}")}
        for d in host.get("disks") or []
        if d.get("use") == "osd"
    ]


def ceph_zap_allowed(plan: Plan, host: str) -> list[str]:
    """Disk names of this host that the plan allows to be wiped."""
    return [str(z["disk"]) for z in _ceph(plan).get("zap") or [] if z["host"] == host]


def ceph_memory(plan: Plan) -> dict[str, Any]:
    """The plan's Ceph memory settings ({} without Ceph)."""
    return dict(_ceph(plan).get("memory") or {})


def _dataset_pools(plan: Plan) -> dict[str, list[str]]:
    """Pool -> the racks of the datasets that name it."""
    pools: dict[str, list[str]] = {}
    for dataset in ((plan.get("scheduler") or {}).get("datasets") or {}).values():
        if dataset.get("pool"):
            racks = pools.setdefault(str(dataset["pool"]), [])
            racks.extend(r for r in dataset["racks"] if r not in racks)
    return pools


def ceph_crush_rules(plan: Plan) -> list[dict[str, Any]]:
    """Replicated rules: one for the plan's failure domain over the whole tree, and one per
    dataset pool that only reaches the dataset's racks (a rack itself, or a root linking
    the racks when there are several)."""
    if not _ceph(plan):
        return []
    domain = _ceph(plan)["failure_domain"]
    rules = [{"name": f"replicated_{domain}", "take": "default", "type": domain, "racks": []}]
    for pool, racks in sorted(_dataset_pools(plan).items()):
        # Inside one rack the replicas can only be spread over hosts.
        inner = "host" if domain != "host" and len(racks) == 1 else domain
        take = racks[0] if len(racks) == 1 else f"dataset-{pool}"
        rules.append(
            {"name": f"dataset_{pool}", "take": take, "type": inner, "racks": sorted(racks)}
        )
    return rules


def ceph_pools(plan: Plan) -> list[dict[str, Any]]:
    """The plan's pools and the CRUSH rule each one uses."""
    ceph = _ceph(plan)
    dataset_pools = _dataset_pools(plan)
    pools = []
    for pool in ceph.get("pools") or []:
        spec = dict(pool)
        spec["rule"] = (
            f"dataset_{spec['name']}"
            if spec["name"] in dataset_pools
            else f"replicated_{ceph['failure_domain']}"
        )
        pools.append(spec)
    return pools


def ceph_crush_tree(plan: Plan, hosts: list[Host]) -> list[dict[str, Any]]:
    """Buckets under the root `default`, parents first: rows (only with failure domain row),
    one rack per plan rack that holds OSD hosts, and the OSD hosts under their racks."""
    domain = _ceph(plan).get("failure_domain")
    racks = plan.get("racks") or {}
    buckets: list[dict[str, Any]] = []
    seen: set[str] = set()
    for host in hosts:
        rack = host.get("rack")
        parent = "default"
        if rack:
            row = (racks.get(rack) or {}).get("row") if domain == "row" else None
            if row and f"row:{row}" not in seen:
                seen.add(f"row:{row}")
                buckets.append({"name": str(row), "type": "row", "parent": "default"})
            if rack not in seen:
                seen.add(str(rack))
                buckets.append({"name": str(rack), "type": "rack", "parent": row or "default"})
            parent = str(rack)
        buckets.append({"name": str(host["hostname"]), "type": "host", "parent": parent})
    return sorted(buckets, key=lambda b: ["row", "rack", "host"].index(b["type"]))


def ceph_crush_location(plan: Plan, host: Host) -> str:
    """crush_location of an OSD host, so a new OSD starts in its planned rack."""
    rack = host.get("rack")
    racks = plan.get("racks") or {}
    parts = ["root=default"]
    row = (racks.get(rack) or {}).get("row") if rack else None
    if row and _ceph(plan).get("failure_domain") == "row":
        parts.append(f"row={in_grammar(row, 'bucket')}")  # ceph.conf: one line, one word
    if rack:
        parts.append(f"rack={rack}")
    parts.append(f"host={host['hostname']}")
    return " ".join(parts)


def ceph_cephfs(plan: Plan) -> dict[str, Any] | None:
    """The plan's CephFS (name, mount, clients, ...), or None without one."""
    fs = _ceph(plan).get("cephfs")
    return dict(fs) if fs else None


def ceph_cephfs_clients(plan: Plan, hosts: list[Host]) -> list[str]:
    """Hosts that mount the CephFS: every host with one of the client roles."""
    fs = ceph_cephfs(plan)
    if not fs:
        return []
    return [str(h["hostname"]) for h in hosts if set(h.get("roles") or []) & set(fs["clients"])]


def ceph_dataset_volumes(plan: Plan) -> list[dict[str, str]]:
    """Datasets with a pool become CephFS subvolumes on that pool (group `datasets`)."""
    datasets = (plan.get("scheduler") or {}).get("datasets") or {}
    return [
        {"name": str(name), "pool": str(d["pool"]), "path": str(d.get("path") or "")}
        for name, d in sorted(datasets.items())
        if d.get("pool")
    ]


def ceph_nfs_groups(plan: Plan) -> list[str]:
    """Subvolume groups of the NFS exports the CephFS backs (backend cephfs)."""
    if not ceph_cephfs(plan):
        return []
    exports = ((plan.get("storage") or {}).get("nfs") or {}).get("exports") or []
    return [nfs_volume_group(e["path"]) for e in exports if e.get("backend") == "cephfs"]


def ceph_nfs_caps(fs_name: str, groups: list[str]) -> dict[str, str]:
    """An NFS gateway's caps: its exports' trees only, and the file system's data pools."""
    return {
        "mon": f"allow r fsname={fs_name}",
        "mds": ", ".join(f"allow rw fsname={fs_name} path=/volumes/{g}" for g in groups),
        "osd": f"allow rw tag cephfs data={fs_name}",
    }


def ceph_client_caps(fs_name: str) -> dict[str, str]:
    """A CephFS client's caps: read the maps of its file system, read and write the file
    system's data pools (only those, by tag) and its tree through the MDS."""
    return {
        "mon": f"allow r fsname={fs_name}",
        "mds": f"allow rw fsname={fs_name}",
        "osd": f"allow rw tag cephfs data={fs_name}",
    }


def mds_affinity(plan: Plan, mds_hosts: list[str], controllers: list[str]) -> list[dict[str, str]]:
    """`mds_join_fs` for every MDS but the one on the node of a Slurm HA pair's primary: the
    monitors then keep the CephFS's active MDS away from that node (and move it away when it
    is there). Losing the primary's node then costs no MDS failover, whose reconnect phase
    waits up to mds_reconnect_timeout (45 s) for the lost client before the backup can evict
    it (docs/reliability.md)."""
    fs = ceph_cephfs(plan)
    if not fs or len(controllers) < 2 or controllers[0] not in mds_hosts:
        return []
    others = [h for h in mds_hosts if h != controllers[0]]
    return [{"who": f"mds.{h}", "name": "mds_join_fs", "value": str(fs["name"])} for h in others]


# The MDS flushes its journal once a tick. Slurm saves each state file by hard links
# (file -> file.old, file.new -> file), and CephFS answers an unlink of a hard-linked file only
# once the journal is flushed: about 5 s per file at the default tick, so a slurmctld stop
# (which saves every file) took 27 s on the lab, and 8 s at a 1 s tick.
SLURM_STATE_MDS_TICK_S = 1


def slurm_state_tick(plan: Plan) -> list[dict[str, str]]:
    """`mds_tick_interval` of SLURM_STATE_MDS_TICK_S when Slurm's StateSaveLocation is on the
    CephFS; nothing otherwise."""
    fs = ceph_cephfs(plan)
    slurm = (plan.get("scheduler") or {}).get("slurm") or {}
    state, mount = str(slurm.get("state_save") or ""), str((fs or {}).get("mount") or "")
    if not mount or not on_mount(state, [mount]):
        return []
    return [{"who": "mds", "name": "mds_tick_interval", "value": str(SLURM_STATE_MDS_TICK_S)}]


def ceph_config_options(
    plan: Plan, mds_hosts: list[str] | None = None, controllers: list[str] | None = None
) -> list[dict[str, str]]:
    """Options for the monitors' configuration database: the plan's memory settings, the
    MDS affinity of an HA pair (mds_affinity), the MDS tick for Slurm's state on the CephFS
    (slurm_state_tick), then the plan's extra `config` (who, option, value): one entry per
    (who, option), the plan's own replacing a default."""
    memory = ceph_memory(plan)
    if not memory:
        return []
    mib = 1024 * 1024
    options = [
        {"who": "osd", "name": "osd_memory_target", "value": memory["osd_memory_target_mib"] * mib},
        {"who": "mon", "name": "mon_memory_target", "value": memory["mon_memory_target_mib"] * mib},
        {"who": "mds", "name": "mds_cache_memory_limit", "value": memory["mds_cache_mib"] * mib},
    ]
    if memory.get("bluestore_cache_mib"):
        options += [
            {"who": "osd", "name": "bluestore_cache_autotune", "value": "false"},
            {
                "who": "osd",
                "name": "bluestore_cache_size",
                "value": memory["bluestore_cache_mib"] * mib,
            },
        ]
    options += mds_affinity(plan, mds_hosts or [], controllers or [])
    options += slurm_state_tick(plan)
    for section, values in sorted((_ceph(plan).get("config") or {}).items()):
        for name, value in sorted(values.items()):
            text = str(value).lower() if isinstance(value, bool) else str(value)
            options.append({"who": section, "name": name.replace(" ", "_"), "value": text})
    # One entry per (who, name), the last one (the plan's own) winning: two would be set in
    # turn on every run, and the value in force would flip between them.
    kept = {(o["who"], o["name"]): {**o, "value": str(o["value"])} for o in options}
    return list(kept.values())
