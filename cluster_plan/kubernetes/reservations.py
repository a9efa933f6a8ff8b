"""Reservations as taints: during a reservation's window its nodes carry the taint
`reservation.cluster-plan.io/<name>:NoSchedule`, which only pods that declared the
reservation (and were allowed to) tolerate. Kubernetes has no notion of a future window, so
the role sets and removes the taint with systemd timers on the first control plane at the
window's start and end."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.cluster import KubernetesPlan


def reservation_windows(plan: KubernetesPlan) -> list[dict[str, Any]]:
    scheduler = plan.expanded.get("scheduler") or {}
    windows = []
    for name, spec in (scheduler.get("reservations") or {}).items():
        groups = set(spec.get("node_groups") or [])
        listed = set(spec.get("nodes") or [])
        members = [n for n in plan.nodes if n in listed or plan.host(n)["node_group"] in groups]
        start = datetime.fromisoformat(str(spec["start"]))
        end = start + timedelta(minutes=int(spec["duration_minutes"]))
        windows.append(
            {
                "name": str(name),
                "taint": {"key": names.reservation_taint(str(name)), "effect": "NoSchedule"},
                "nodes": members,
                "start": start.isoformat(),
                "end": end.isoformat(),
                "users": [str(u) for u in spec.get("users") or []],
                "namespaces": [str(a) for a in spec.get("accounts") or []],
            }
        )
    return windows
