#!/usr/bin/python
"""Keep a CephFS as the plan describes it: the file system, its data pools, the number of
standby MDS daemons wanted, and one subvolume per dataset on the dataset's pool."""

from __future__ import annotations

import errno
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cluster_plan.cluster.plugins.module_utils.ceph_cli import CephError, ceph

DOCUMENTATION = r"""
module: ceph_fs
short_description: Create a CephFS, add data pools, and a subvolume per dataset
description:
  - Creates the file system when missing, adds every planned data pool, sets
    standby_count_wanted, and creates the subvolume group C(datasets) with one subvolume per
    dataset laid out on the dataset's pool. Returns each subvolume's path in the file system.
  - Never removes a file system, pool or subvolume. Supports check mode.
options:
  name: {description: File system name., type: str, required: true}
  metadata_pool: {description: Metadata pool., type: str, required: true}
  data_pool: {description: Default data pool., type: str, required: true}
  standby_count_wanted:
    description: Standby MDS daemons wanted (0 silences the warning with one MDS).
    type: int
    required: true
  datasets:
    description: Datasets, each with name and pool.
    type: list
    elements: dict
    default: []
  groups:
    description: Further subvolume groups to keep (one per NFS export backed by the CephFS).
    type: list
    elements: str
    default: []
"""

GROUP = "datasets"


def fs_steps(module: Any, p: dict[str, Any]) -> list[list[str]]:
    found = {f["name"]: f for f in ceph(module, "fs", "ls")}
    steps: list[list[str]] = []
    fs = found.get(p["name"])
    if fs is None:
        steps.append(["fs", "new", p["name"], p["metadata_pool"], p["data_pool"]])
        data_pools = {p["data_pool"]}
    else:
        data_pools = set(fs["data_pools"])
    for pool in sorted({d["pool"] for d in p["datasets"]} - data_pools):
        steps.append(["fs", "add_data_pool", p["name"], pool])
    standby = None
    if fs is not None:
        dump = ceph(module, "fs", "get", p["name"])
        standby = dump["mdsmap"].get("standby_count_wanted")
    if standby != p["standby_count_wanted"]:
        steps.append(
            ["fs", "set", p["name"], "standby_count_wanted", str(p["standby_count_wanted"])]
        )
    return steps


def subvolume_paths(module: Any, p: dict[str, Any]) -> tuple[list[list[str]], dict[str, str]]:
    """Create the datasets' subvolumes (unless in check mode); return the commands and the
    paths of the subvolumes that exist."""
    steps: list[list[str]] = []
    fs = p["name"]
    groups = {
        g["name"]
        for g in ceph(module, "fs", "subvolumegroup", "ls", fs, allow=(errno.ENOENT,)) or []
    }
    wanted = ([GROUP] if p["datasets"] else []) + list(p["groups"])
    steps += [["fs", "subvolumegroup", "create", fs, g] for g in wanted if g not in groups]
    have: set[str] = set()
    if GROUP in groups:
        have = {v["name"] for v in ceph(module, "fs", "subvolume", "ls", fs, "--group_name", GROUP)}
    for dataset in p["datasets"]:
        if dataset["name"] not in have:
            steps.append(
                ["fs", "subvolume", "create", fs, dataset["name"], "--group_name", GROUP,
                 "--pool_layout", dataset["pool"]]
            )  # fmt: skip
    if not module.check_mode:
        for step in steps:
            ceph(module, *step, as_json=False)
        have |= {d["name"] for d in p["datasets"]}
    paths = {
        d["name"]: ceph(
            module,
            "fs",
            "subvolume",
            "getpath",
            fs,
            d["name"],
            "--group_name",
            GROUP,
            as_json=False,
        ).strip()
        for d in p["datasets"]
        if d["name"] in have
    }
    return steps, paths


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "metadata_pool": {"type": "str", "required": True},
            "data_pool": {"type": "str", "required": True},
            "standby_count_wanted": {"type": "int", "required": True},
            "datasets": {"type": "list", "elements": "dict", "default": []},
            "groups": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    paths: dict[str, str] = {}
    try:
        steps = fs_steps(module, p)
        if not module.check_mode:
            for step in steps:
                ceph(module, *step, as_json=False)
        if module.check_mode and any(s[:2] == ["fs", "new"] for s in steps):
            more = [["fs", "subvolume", "..."]] if p["datasets"] or p["groups"] else []
        else:
            more, paths = subvolume_paths(module, p)
    except CephError as err:
        module.fail_json(msg=f"file system {p['name']}: {err}")
    steps += more
    module.exit_json(changed=bool(steps), commands=[" ".join(s) for s in steps], paths=paths)


if __name__ == "__main__":
    main()
