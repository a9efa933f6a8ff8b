"""The few machine-wide changes a lab needs, remembered so that the `lab down` that leaves
no lab running on the machine undoes them:

- kernel limits: every node's systemd, journald, logind and dbus take inotify instances
  from root's machine-wide allowance (default 128, about 20 nodes); past it nodes hang in
  boot with "Too many open files";
- the /run/netns mount that the first `ip netns add` makes.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from cluster_plan.lab.names import RUN_ROOT
from cluster_plan.lab.proc import run

NEEDED = {"fs/inotify/max_user_instances": 8192, "fs/inotify/max_user_watches": 1048576}
SYSCTL = Path("/proc/sys")
NETNS_DIR = Path("/run/netns")


def _record(run_root: Path) -> Path:
    return run_root / "host-changes.json"


def _load(run_root: Path) -> dict[str, Any]:
    path = _record(run_root)
    loaded: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return loaded


def _save(run_root: Path, record: dict[str, Any]) -> None:
    run_root.mkdir(parents=True, exist_ok=True)
    _record(run_root).write_text(json.dumps(record))


def netns_mounted() -> bool:
    """Whether /run/netns is a mount point (`ip netns add` makes it one)."""
    return any(
        line.split()[4] == str(NETNS_DIR)
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )


def prepare(run_root: Path = RUN_ROOT) -> list[str]:
    """Raise the limits that are too low and note whether /run/netns was a mount before any
    lab; returns the limits changed. Originals are kept from the first lab on."""
    record = _load(run_root)
    limits: dict[str, int] = dict(record.get("limits") or {})
    changed = []
    for key, wanted in NEEDED.items():
        current = int((SYSCTL / key).read_text())
        if current < wanted:
            limits.setdefault(key, current)
            (SYSCTL / key).write_text(str(wanted))
            changed.append(key.replace("/", "."))
    record["limits"] = limits
    record.setdefault("netns_mount_was_there", netns_mounted())
    _save(run_root, record)
    return changed


def undo_when_last(run_root: Path = RUN_ROOT) -> None:
    """Put the machine back, but only once no lab on it is left running."""
    if not _record(run_root).exists() or any(run_root.glob("*/state.json")):
        return
    record = _load(run_root)
    for key, value in dict(record.get("limits") or {}).items():
        (SYSCTL / key).write_text(str(value))
    if not record.get("netns_mount_was_there") and netns_mounted() and not any(NETNS_DIR.iterdir()):
        run(["umount", str(NETNS_DIR)], check=False)
        with contextlib.suppress(OSError):
            NETNS_DIR.rmdir()
    _record(run_root).unlink()
