"""Names and paths of everything the lab makes, derived from the expanded plan alone.

`lab down` finds what to remove from these names, so it works even when the state
file is gone (e.g. after a crash).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cluster_plan.cli.policy import CommandError
from cluster_plan.plan.contract import ExpandedPlan

RUN_ROOT = Path("/run/cluster-plan/lab")
VAR_ROOT = Path("/var/lib/cluster-plan/lab")
CACHE_ROOT = Path(os.environ.get("CLUSTER_PLAN_LAB_CACHE", "/var/cache/cluster-plan/lab"))
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "cluster-plan-lab"
IFNAMSIZ = 15


class LabError(CommandError):
    """A lab operation failed in a way the user can act on; str() is the message."""


def lab_id(expanded: ExpandedPlan, environ: Mapping[str, str] | None = None) -> str:
    """The lab instance name: $CLUSTER_PLAN_LAB_ID (of `environ`, by default this process's
    environment), else the cluster name.

    Two labs of one plan cannot share a machine under one id, so tests that run beside
    a developer's `make lab` pick their own id.
    """
    env = os.environ if environ is None else environ
    raw = env.get("CLUSTER_PLAN_LAB_ID") or str(expanded["cluster"]["name"])
    clean = re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")
    if not clean:
        raise LabError(f"lab id {raw!r} has no usable characters")
    return clean[:24]


@dataclass(frozen=True)
class LabNames:
    lab: str

    @property
    def prefix(self) -> str:
        return f"cpl-{self.lab}-"

    @property
    def fabric_ns(self) -> str:
        return f"{self.prefix}fabric"

    @property
    def admin_ns(self) -> str:
        return f"{self.prefix}admin"

    def node_ns(self, host: str) -> str:
        return f"{self.prefix}n-{host}"

    @property
    def run_dir(self) -> Path:
        return RUN_ROOT / self.lab

    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    @property
    def control_dir(self) -> Path:
        """SSH ControlMaster sockets (short path: unix sockets allow 107 bytes)."""
        return self.run_dir / "c"

    @property
    def var_dir(self) -> Path:
        return VAR_ROOT / self.lab

    def node_dir(self, host: str) -> Path:
        return self.var_dir / "nodes" / host

    @property
    def ssh_key(self) -> Path:
        return VAR_ROOT / "ssh" / "id_ed25519"

    @property
    def proxy_socket(self) -> Path:
        return self.run_dir / "apt-proxy.sock"

    def cgroup_rel(self, host: str) -> str:
        return f"{CGROUP_PARENT}/{self.lab}/{host}"


def ifname(*parts: str) -> str:
    """A readable interface name of at most 15 bytes; hashed when the parts are too long."""
    name = "-".join(parts)
    if len(name) <= IFNAMSIZ:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:4]
    return f"{name[: IFNAMSIZ - 5]}.{digest}"


def for_plan(expanded: ExpandedPlan) -> LabNames:
    return LabNames(lab_id(expanded))
