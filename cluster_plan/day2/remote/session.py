"""Gather facts from a plan's hosts: the caller's side of cluster_plan.day2.remote.gather."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.day2.remote.connection import pyinfra_hosts
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.transport.options import SshOptions

GATHER_TIMEOUT_S = 600


class GatherError(Exception):
    """The gathering itself failed (not a host: those are results)."""


@dataclass
class HostFacts:
    """What was read on one host, or why it could not be reached."""

    reachable: bool
    facts: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    reason: str | None = None


def parse_results(data: Any, hosts: list[str]) -> dict[str, HostFacts]:
    if not isinstance(data, dict):
        raise GatherError("the gatherer printed no result object")
    results = {}
    for name in hosts:
        entry = data.get(name)
        if not isinstance(entry, dict):
            results[name] = HostFacts(False, reason="no result from the gatherer")
        elif entry.get("reachable"):
            results[name] = HostFacts(True, entry.get("facts") or {}, entry.get("errors") or {})
        else:
            results[name] = HostFacts(False, reason=str(entry.get("reason") or "unreachable"))
    return results


def run_gatherer(request: dict[str, Any], timeout_s: float = GATHER_TIMEOUT_S) -> Any:
    """Run `python -m cluster_plan.day2.remote.gather` on one request; its JSON answer."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cluster_plan.day2.remote.gather"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "PYTHONPATH": path},
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GatherError(f"gathering facts took over {timeout_s:.0f}s") from None
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise GatherError(f"the gatherer failed ({done.returncode}): {tail}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise GatherError("the gatherer printed something other than JSON") from None


def lab_down(expanded: ExpandedPlan) -> str | None:
    """Why no host of a lab plan can be reached (its lab is not up), else None."""
    if expanded["lab"] is None:
        return None
    from cluster_plan.lab.names import for_plan

    names = for_plan(expanded)
    if Path("/run/netns", names.admin_ns).exists():
        return None
    return f"the lab '{names.lab}' is not up (cluster-plan lab up PLAN)"


def gather(
    expanded: ExpandedPlan,
    plan_path: str,
    collect: str,
    options: dict[str, dict[str, Any]] | None = None,
    hosts: list[str] | None = None,
    timeout_s: float = GATHER_TIMEOUT_S,
    ssh: SshOptions | None = None,
) -> dict[str, HostFacts]:
    """Run collector ``collect`` on every host (or ``hosts``) in parallel, over the inventory's
    SSH settings and the user's (``ssh``)."""
    chosen = hosts if hosts is not None else list(expanded["hosts"])
    if reason := lab_down(expanded):
        return {name: HostFacts(False, reason=reason) for name in chosen}
    with tempfile.TemporaryDirectory(prefix="cluster-plan-remote-") as workdir:
        request = {
            "hosts": pyinfra_hosts(expanded, plan_path, Path(workdir), chosen, ssh),
            "collect": collect,
            "options": options or {},
        }
        data = run_gatherer(request, timeout_s)
    return parse_results(data, chosen)
