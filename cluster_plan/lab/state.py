"""The lab's record of what it started: process ids with start times, and active faults.

Kept under /run so that a reboot (which ends every lab process) also forgets it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.lab.proc import ProcRef


@dataclass
class LabState:
    lab: str
    plan: str
    nodes: dict[str, ProcRef] = field(default_factory=dict)
    services: dict[str, ProcRef] = field(default_factory=dict)
    delays: dict[str, ProcRef] = field(default_factory=dict)
    faults: dict[str, dict[str, Any]] = field(default_factory=dict)
    loops: dict[str, str] = field(default_factory=dict)
    cidrs: list[str] = field(default_factory=list)
    fabric_digest: str = ""
    host_digests: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def _refs(raw: dict[str, Any]) -> dict[str, ProcRef]:
    return {key: ProcRef(int(val["pid"]), int(val["started"])) for key, val in raw.items()}


def load(path: Path) -> LabState | None:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):  # no lab state (never up, or taken down) or an unreadable one
        return None
    return LabState(
        lab=raw["lab"],
        plan=raw["plan"],
        nodes=_refs(raw.get("nodes", {})),
        services=_refs(raw.get("services", {})),
        delays=_refs(raw.get("delays", {})),
        faults=raw.get("faults", {}),
        loops=raw.get("loops", {}),
        cidrs=list(raw.get("cidrs", [])),
        fabric_digest=str(raw.get("fabric_digest", "")),
        host_digests=dict(raw.get("host_digests", {})),
    )


def other_labs_cidrs(run_root: Path, lab: str) -> set[str]:
    """Plan subnets that other labs on this machine still guard."""
    cidrs: set[str] = set()
    for path in run_root.glob("*/state.json"):
        other = load(path)
        if other is not None and other.lab != lab:
            cidrs.update(other.cidrs)
    return cidrs


def save(path: Path, state: LabState) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.to_json())
    os.replace(tmp, path)


@contextmanager
def locked(run_root: Path, lab: str, remove: bool = False) -> Iterator[None]:
    """One lab command at a time per lab (up, down, restart, fault); `remove` deletes the
    lock file on the way out (for `lab down`)."""
    run_root.mkdir(parents=True, exist_ok=True)
    path = run_root / f"{lab}.lock"
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if remove:
                path.unlink(missing_ok=True)
