"""What a running lab is, read from this machine: the nodes it runs for a plan, and the bytes
each HTB class of a fabric port has sent (the lab's links: a bypass, the scaled bucket)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cluster_plan.api import load_expanded
from cluster_plan.lab import state
from cluster_plan.lab.names import for_plan

_CLASS_SENT = re.compile(r"class htb (1:\d)\b.*?\n\s*Sent (\d+) bytes", re.S)


def running_hosts(plan: Path) -> set[str]:
    """The hosts whose nodes are alive in the plan's lab (under $CLUSTER_PLAN_LAB_ID)."""
    found = state.load(for_plan(load_expanded(str(plan))).state_file)
    assert found is not None, f"no lab runs for {plan}"
    return {host for host, ref in found.nodes.items() if ref.alive()}


def class_bytes(fabric_ns: str, dev: str) -> dict[str, int]:
    """Bytes sent so far through each HTB class of a fabric port: 1:1 the bypasses (the
    package proxy; a Kubernetes plan's mirror), 1:2 the link's scaled token bucket."""
    out = subprocess.run(
        ["tc", "-n", fabric_ns, "-s", "class", "show", "dev", dev],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    return {classid: int(sent) for classid, sent in _CLASS_SENT.findall(out)}
