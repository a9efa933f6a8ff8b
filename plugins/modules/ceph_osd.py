#!/usr/bin/python
"""One OSD per planned disk with ceph-volume: leave this cluster's OSD alone, refuse a disk
that holds anything else (unless the plan allows wiping it), create one on an empty disk."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: ceph_osd
short_description: Create, or find and activate, the OSD of one planned disk
description:
  - Inspects the device with blkid and ceph-volume. A disk holding an OSD of this cluster
    (same fsid) is activated when needed and otherwise left alone. An empty disk gets a new
    BlueStore OSD (C(ceph-volume raw prepare) in raw mode, C(lvm create) in LVM mode).
  - A missing device, or one that holds a file system, partitions, an LVM volume or another
    cluster's OSD fails with a message naming host, disk and why; it is wiped
    (C(ceph-volume lvm zap)) only when I(zap) is true. Supports check mode.
options:
  host: {description: Host name (for messages)., type: str, required: true}
  disk: {description: The plan's disk name (for messages)., type: str, required: true}
  device: {description: Device path., type: str, required: true}
  fsid: {description: This cluster's fsid., type: str, required: true}
  mode: {description: ceph-volume mode., type: str, choices: [raw, lvm], required: true}
  zap: {description: Wipe the disk when it holds something else., type: bool, default: false}
"""

OSD_DIR = "/var/lib/ceph/osd/ceph-{}"


def blkid(module: Any, device: str) -> dict[str, str]:
    """Signatures on the device itself (blkid exits 2 when there are none)."""
    rc, out, err = module.run_command(["blkid", "-p", "-o", "export", device])
    if rc == 2:
        return {}
    if rc != 0:
        module.fail_json(msg=f"blkid {device}: {err.strip()} (exit {rc})")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def partitions(module: Any, device: str) -> list[str]:
    rc, out, _ = module.run_command(["lsblk", "-n", "-l", "-o", "NAME,TYPE", device])
    return (
        [ln.split()[0] for ln in out.splitlines()[1:] if ln.split()[1:] == ["part"]]
        if rc == 0
        else []
    )


def osds_on(module: Any, device: str, mode: str) -> list[dict[str, str]]:
    """OSDs ceph-volume finds on the device: cluster fsid, OSD id and uuid."""
    rc, out, _ = module.run_command(["ceph-volume", mode, "list", device, "--format", "json"])
    if rc != 0:
        return []
    found = json.loads(out or "{}")
    if mode == "raw":
        return [
            {"fsid": o["ceph_fsid"], "id": str(o["osd_id"]), "uuid": o["osd_uuid"]}
            for o in found.values()
        ]
    return [
        {"fsid": t["ceph.cluster_fsid"], "id": t["ceph.osd_id"], "uuid": t["ceph.osd_fsid"]}
        for volumes in found.values()
        for t in (v["tags"] for v in volumes)
    ]


def inspect(module: Any, device: str, fsid: str, mode: str) -> dict[str, Any]:
    """What the device holds: missing, not-block, empty, osd (this cluster's) or foreign."""
    if not os.path.exists(device):
        return {"state": "missing", "why": "does not exist"}
    real = os.path.realpath(device)
    if not stat.S_ISBLK(os.stat(real).st_mode):
        return {"state": "missing", "why": f"is not a block device ({real})"}
    signature = blkid(module, real)
    kind = signature.get("TYPE", "")
    if not signature:
        parts = partitions(module, real)
        if parts:
            return {"state": "foreign", "why": f"holds partitions ({', '.join(parts)})"}
        return {"state": "empty", "real": real}
    if kind in ("ceph_bluestore", "LVM2_member"):
        for osd in osds_on(module, real, "raw" if kind == "ceph_bluestore" else "lvm"):
            if osd["fsid"] == fsid:
                return {"state": "osd", "real": real, "osd": osd, "kind": kind}
            return {
                "state": "foreign",
                "why": f"holds OSD {osd['id']} of another Ceph cluster ({osd['fsid']})",
            }
        if kind == "LVM2_member":
            return {"state": "foreign", "why": "holds an LVM physical volume"}
    usage = signature.get("USAGE", "")
    what = f"a file system ({kind})" if usage == "filesystem" else f"a {kind or usage} signature"
    return {"state": "foreign", "why": f"holds {what}"}


def activated(osd: dict[str, str]) -> bool:
    try:
        with open(os.path.join(OSD_DIR.format(osd["id"]), "fsid")) as handle:
            return handle.read().strip() == osd["uuid"]
    except OSError:
        return False


def run(module: Any, argv: list[str], what: str) -> None:
    rc, out, err = module.run_command(argv)
    if rc != 0:
        tail = "\n".join((err or out).strip().splitlines()[-6:])
        module.fail_json(msg=f"{what}: {' '.join(argv)} failed (exit {rc}):\n{tail}")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "disk": {"type": "str", "required": True},
            "device": {"type": "str", "required": True},
            "fsid": {"type": "str", "required": True},
            "mode": {"type": "str", "required": True, "choices": ["raw", "lvm"]},
            "zap": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    what = f"host {p['host']}: OSD disk {p['disk']} ({p['device']})"
    found = inspect(module, p["device"], p["fsid"], p["mode"])
    done: list[str] = []
    if found["state"] == "missing":
        module.fail_json(msg=f"{what} {found['why']}; nothing was changed", state="missing")
    if found["state"] == "foreign":
        if not p["zap"]:
            module.fail_json(
                msg=f"{what} {found['why']}; refusing to wipe it (nothing was changed). "
                f"List {{host: {p['host']}, disk: {p['disk']}}} under storage.ceph.zap "
                "to let the role wipe it",
                state="foreign",
            )
        if module.check_mode:
            module.exit_json(changed=True, actions=["zap", "create"], state="foreign")
        run(module, ["ceph-volume", "lvm", "zap", os.path.realpath(p["device"])], what)
        done.append("zap")
        found = inspect(module, p["device"], p["fsid"], p["mode"])
    if found["state"] == "empty":
        if module.check_mode:
            module.exit_json(changed=True, actions=[*done, "create"], state="empty")
        verb = ["raw", "prepare"] if p["mode"] == "raw" else ["lvm", "create"]
        run(module, ["ceph-volume", *verb, "--bluestore", "--data", found["real"]], what)
        done.append("create")
        found = inspect(module, p["device"], p["fsid"], p["mode"])
        if found["state"] != "osd":
            module.fail_json(msg=f"{what}: ceph-volume made no OSD of this cluster on it")
    osd = found["osd"]
    if not activated(osd):
        done.append("activate")
        if not module.check_mode:
            if p["mode"] == "raw":
                argv = [
                    "ceph-volume",
                    "raw",
                    "activate",
                    "--device",
                    found["real"],
                    "--no-systemd",
                    "--no-tmpfs",
                ]
            else:
                argv = ["ceph-volume", "lvm", "activate", osd["id"], osd["uuid"]]
            run(module, argv, what)
    module.exit_json(
        changed=bool(done), actions=done, state="osd", osd_id=int(osd["id"]), osd_uuid=osd["uuid"]
    )


if __name__ == "__main__":
    main()
