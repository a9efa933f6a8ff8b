"""The expanded plan, kept once per Ansible process and handed out by lookup.

The inventory plugin puts every host and group in the inventory, but only small values in
its variables: `plan_host` and `cluster_plan` are templates that ask the lookup
`cluster_plan.cluster.plan` for the data, which the plugin left here. Ansible's workers are
forked from the process that parsed the inventory, so they share this memo; a process that
did not parse the plan (a job run on an inventory exported elsewhere) loads it once from
`cluster_plan_file`. So `ansible-inventory --list` prints a few bytes per host instead of the
whole cluster once per host, and a playbook's inventory load costs what a static one does.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from cluster_plan.plan.contract import ExpandedPlan, Host

_PLANS: dict[str, tuple[float, ExpandedPlan, dict[str, Any]]] = {}


def _key(plan_file: str) -> str:
    return os.path.realpath(plan_file)


def _stamp(plan_file: str) -> float:
    """Changes when the plan or its lock changes (a long-lived process sees a new plan)."""
    from cluster_plan.plan.lockfile import lock_path_for

    stamp = 0.0
    for path in (plan_file, str(lock_path_for(plan_file))):
        with contextlib.suppress(OSError):
            stamp += os.stat(path).st_mtime_ns
    return stamp


def remember(plan_file: str, expanded: ExpandedPlan) -> None:
    cluster = {k: v for k, v in expanded.items() if k not in ("hosts", "groups")}
    _PLANS[_key(plan_file)] = (_stamp(plan_file), expanded, cluster)


def _recall(plan_file: str) -> tuple[ExpandedPlan, dict[str, Any]]:
    key = _key(plan_file)
    known = _PLANS.get(key)
    if known is None or known[0] != _stamp(plan_file):
        from cluster_plan.api import load_expanded

        remember(plan_file, load_expanded(plan_file))
        known = _PLANS[key]
    return known[1], known[2]


def cluster_data(plan_file: str) -> dict[str, Any]:
    """The expanded plan without its hosts and groups: Ansible's `cluster_plan`."""
    return _recall(plan_file)[1]


def host_data(plan_file: str, host: str) -> Host:
    """One host of the expanded plan: Ansible's `plan_host`."""
    return _recall(plan_file)[0]["hosts"][host]
