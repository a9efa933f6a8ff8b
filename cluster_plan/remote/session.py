"""Gather facts from a plan's hosts: the caller's side of cluster_plan.remote.gather."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.contract import ExpandedPlan
from cluster_plan.remote.connection import pyinfra_hosts

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


def gather(
    expanded: ExpandedPlan,
    plan_path: str,
    collect: str,
    options: dict[str, dict[str, Any]] | None = None,
    hosts: list[str] | None = None,
    timeout_s: float = GATHER_TIMEOUT_S,
) -> dict[str, HostFacts]:
    """Run collector ``collect`` on every host (or ``hosts``) in parallel."""
    chosen = hosts if hosts is not None else list(expanded["hosts"])
    with tempfile.TemporaryDirectory(prefix="cluster-plan-remote-") as workdir:
        request = {
            "hosts": pyinfra_hosts(expanded, plan_path, Path(workdir), chosen),
            "collect": collect,
            "options": options or {},
        }
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)}  # fmt: skip
        try:
            done = subprocess.run(
                [sys.executable, "-m", "cluster_plan.remote.gather"],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GatherError(f"gathering facts took over {timeout_s:.0f}s") from None
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise GatherError(f"the gatherer failed ({done.returncode}): {tail}")
    try:
        data = json.loads(done.stdout)
    except ValueError:
        raise GatherError("the gatherer printed something other than JSON") from None
    return parse_results(data, chosen)
