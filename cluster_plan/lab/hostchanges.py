"""Kernel limits the host needs raised for many systemd nodes, and their restoration.

Every node's systemd, journald, logind and dbus take inotify instances from root's
machine-wide allowance (default 128, about 20 nodes); past it, nodes hang in boot with
"Too many open files". `lab up` raises the limits and remembers the originals; the
`lab down` that leaves no lab running puts them back.
"""

from __future__ import annotations

import json
from pathlib import Path

from cluster_plan.lab.names import RUN_ROOT

NEEDED = {"fs/inotify/max_user_instances": 8192, "fs/inotify/max_user_watches": 1048576}
SYSCTL = Path("/proc/sys")
ORIGINALS = RUN_ROOT / "host-limits.json"


def raise_limits() -> list[str]:
    """Raise what is below NEEDED; returns the keys changed (originals saved once)."""
    saved: dict[str, int] = json.loads(ORIGINALS.read_text()) if ORIGINALS.exists() else {}
    changed = []
    for key, wanted in NEEDED.items():
        current = int((SYSCTL / key).read_text())
        if current < wanted:
            saved.setdefault(key, current)
            (SYSCTL / key).write_text(str(wanted))
            changed.append(key.replace("/", "."))
    if saved:
        ORIGINALS.parent.mkdir(parents=True, exist_ok=True)
        ORIGINALS.write_text(json.dumps(saved))
    return changed


def restore_limits(run_root: Path = RUN_ROOT) -> None:
    """Put the originals back, but only once no lab on this machine is left running."""
    if not ORIGINALS.exists() or any(run_root.glob("*/state.json")):
        return
    for key, value in json.loads(ORIGINALS.read_text()).items():
        (SYSCTL / key).write_text(str(value))
    ORIGINALS.unlink()
