"""Alerts that can do their job: a threshold that can fire before the harm it warns of, a wait
the rule evaluation can keep, and routes that each receive something (docs/monitoring.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.defaults import BACKUP_GRACE_HOURS
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.oncalendar import longest_gap_hours

# Ceph stops writes to a pool whose OSDs reach mon_osd_full_ratio: 0.95 unless configured
CEPH_FULL_RATIO = 0.95
_AFTER = ("monitoring", "alert_after_minutes")


def check_alerts(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    del nodes
    monitoring = plan.get("monitoring")
    if not isinstance(monitoring, dict):
        return
    yield from _pool_full(plan, monitoring)
    yield from _backup_age(plan, monitoring)
    yield from _node_down(monitoring)
    yield from _evaluation(plan, monitoring)
    yield from _shadowed_routes(monitoring.get("routes") or {})


def _full_ratio(ceph: dict[str, Any]) -> float:
    for section in (ceph.get("config") or {}).values():
        ratio = section.get("mon_osd_full_ratio") if isinstance(section, dict) else None
        if isinstance(ratio, int | float) and not isinstance(ratio, bool):
            return float(ratio)
    return CEPH_FULL_RATIO


def _pool_full(plan: Plan, monitoring: dict[str, Any]) -> Iterator[Finding]:
    ceph = (plan.get("storage") or {}).get("ceph")
    if not isinstance(ceph, dict):
        return  # the rule is rendered for Ceph's pools only
    full = _full_ratio(ceph) * 100
    threshold = monitoring["ceph_pool_full_pct"]
    if full <= threshold <= 100:  # over 100 is the schema's range finding
        yield Finding(
            "alert-never-fires",
            f"CephPoolNearlyFull fires at {threshold:g} % full, but Ceph stops writes at its "
            f"full ratio ({full:g} %): the pool is read-only before the alert",
            ("monitoring", "ceph_pool_full_pct"),
            hint=f"below {full:g}, with time to act: Ceph's own nearfull warning is at 85",
        )


def _backup_age(plan: Plan, monitoring: dict[str, Any]) -> Iterator[Finding]:
    schedule = (plan.get("backups") or {}).get("schedule")
    allowed = monitoring.get("backup_max_age_hours")
    gap = longest_gap_hours(schedule) if isinstance(schedule, str) else None
    if gap is None or allowed is None or allowed >= gap:
        return
    yield Finding(
        "alert-always-fires",
        f"BackupTooOld fires when a backup is {allowed:g} h old, but backups.schedule "
        f"({schedule}) runs them up to {gap:g} h apart: it fires before every next run",
        ("monitoring", "backup_max_age_hours"),
        hint=f"at least {gap + BACKUP_GRACE_HOURS:g} (the longest gap and {BACKUP_GRACE_HOURS} h "
        "for the run), or leave it out for that default",
    )


def _node_down(monitoring: dict[str, Any]) -> Iterator[Finding]:
    scrape = monitoring["scrape_interval_s"]
    wait = monitoring["alert_after_minutes"]["node_down"]
    if wait * 60 >= scrape:
        return
    yield Finding(
        "alert-always-fires",
        f"NodeDown waits {wait * 60:g} s, less than one scrape ({scrape} s): a single lost "
        "scrape pages, on any busy network",
        (*_AFTER, "node_down"),
        hint=f"at least {scrape / 60:g} (one scrape); the default is three scrapes: "
        f"{max(2, 3 * scrape / 60):g}",
    )


def _waits(plan: Plan, monitoring: dict[str, Any]) -> dict[str, float]:
    """The plan's alert waits, in seconds, of the rules this plan renders."""
    after = dict(monitoring["alert_after_minutes"])
    if not (plan.get("storage") or {}).get("ceph"):
        after.pop("ceph_osd", None)
    if (plan.get("scheduler") or {}).get("type") != "slurm":
        after.pop("slurm_down", None)
        after.pop("slurm_drained", None)
    if (plan.get("scheduler") or {}).get("type") != "kubernetes":
        after.pop("k8s_not_ready", None)
        after.pop("k8s_apiserver", None)
    return {f"alert_after_minutes.{k}": float(v) * 60 for k, v in after.items()}


def _evaluation(plan: Plan, monitoring: dict[str, Any]) -> Iterator[Finding]:
    every = monitoring["evaluation_interval_s"]
    short = sorted((s, name) for name, s in _waits(plan, monitoring).items() if s < every)
    if not short:
        return
    named = ", ".join(f"{name} ({s:g} s)" for s, name in short[:3])
    yield Finding(
        "alert-wait-unkept",
        f"rules are evaluated every {every} s, longer than {named}: such an alert fires one "
        "evaluation late, after the wait the plan states",
        ("monitoring", "evaluation_interval_s"),
        hint=f"evaluate every {short[0][0]:g} s or more often, or wait longer",
    )


def _catches(earlier: dict[str, Any], later: dict[str, Any]) -> bool:
    """Every alert `later` matches, `earlier` matches too."""
    return all(earlier.get(k) in (None, later.get(k)) for k in ("severity", "team"))


def _shadowed_routes(routes: dict[str, Any]) -> Iterator[Finding]:
    """Alertmanager tries routes in order and stops at the first match without continue: a
    route that takes every alert a later one would match leaves that one nothing."""
    names = [n for n, r in routes.items() if isinstance(r, dict)]
    for i, name in enumerate(names):
        route = routes[name]
        if route.get("continue"):
            continue
        hidden = [later for later in names[i + 1 :] if _catches(route, routes[later])]
        if not hidden:
            continue
        matchers = [f"{k} {route[k]}" for k in ("severity", "team") if route.get(k)]
        what = "every alert" + (f" of {' and '.join(matchers)}" if matchers else "")
        routes_word = "routes" if len(hidden) > 1 else "route"
        yield Finding(
            "route-shadows",
            f"route {name} takes {what} and stops there (no continue), before {routes_word} "
            f"{', '.join(hidden)}, which never receive{'' if len(hidden) > 1 else 's'} one",
            ("monitoring", "routes", name),
            hint="move it after the others, set continue: true on it, or send what no route "
            "takes to monitoring.default_receiver instead",
        )
