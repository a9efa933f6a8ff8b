"""Monitoring: one server for Prometheus and Alertmanager, and alerts that can reach someone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan, first_names
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

ROLE = "monitoring_server"


def check_monitoring(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    monitoring = plan.get("monitoring")
    if not isinstance(monitoring, dict):
        return
    yield from _server(nodes)
    receivers = monitoring.get("receivers") or {}
    yield from _receivers(monitoring, receivers)
    yield from _routes(plan, monitoring.get("routes") or {}, receivers)
    if monitoring.get("evaluation_interval_s", 0) < monitoring.get("scrape_interval_s", 0):
        yield Finding(
            "evaluation-faster-than-scrape",
            f"rules are evaluated every {monitoring['evaluation_interval_s']} s on samples "
            f"taken every {monitoring['scrape_interval_s']} s: most evaluations see nothing new",
            ("monitoring", "evaluation_interval_s"),
            severity="warning",
            hint="evaluate at the scrape interval or slower",
        )
    yield from _notifications(monitoring["notifications"])


def _notifications(timing: dict[str, Any]) -> Iterator[Finding]:
    # Alertmanager looks at a group only every group_interval: a shorter repeat cannot happen
    interval, repeat = timing["group_interval_s"], timing["repeat_interval_minutes"]
    if repeat * 60 < interval:
        yield Finding(
            "repeat-before-group-interval",
            f"alerts that still fire would be sent again every {repeat} min, but Alertmanager "
            f"looks at a group only every {interval} s (group_interval_s): they repeat every "
            f"{interval} s",
            ("monitoring", "notifications", "repeat_interval_minutes"),
            severity="warning",
            hint="repeat at group_interval_s or slower",
        )


def _server(nodes: list[Node]) -> Iterator[Finding]:
    servers = [n for n in nodes if ROLE in n.roles]
    if not servers:
        yield Finding(
            "missing-role",
            "monitoring is planned but no host has the role monitoring_server: nothing would "
            "run Prometheus and Alertmanager",
            ("monitoring",),
            hint="add monitoring_server to the roles of a node group of one node "
            "(e.g. the head node's)",
        )
    elif len(servers) > 1:
        yield Finding(
            "monitoring-servers",
            f"{len(servers)} hosts have the role monitoring_server "
            f"({first_names([n.name for n in servers])}); the plan has one Prometheus and "
            "one Alertmanager (two would each send every alert)",
            ("node_groups", servers[0].group, "roles"),
            hint="give the role to a node group of one node",
        )


def _receivers(monitoring: dict[str, Any], receivers: dict[str, Any]) -> Iterator[Finding]:
    mailed = [name for name, r in receivers.items() if isinstance(r, dict) and r.get("email")]
    if mailed and not monitoring.get("smtp"):
        yield Finding(
            "smtp-missing",
            f"receiver {mailed[0]} sends email, but monitoring.smtp names no mail relay",
            ("monitoring", "receivers", mailed[0], "email"),
            hint="add monitoring.smtp: {host: <relay>, from: <address>}",
        )
    default = monitoring.get("default_receiver")
    if default is not None and default not in receivers:
        yield Finding(
            "unknown-receiver",
            f"default_receiver {default!r} is not a receiver of monitoring.receivers",
            ("monitoring", "default_receiver"),
            hint=_known(receivers),
        )
    if not receivers:
        yield Finding(
            "alerts-unrouted",
            "monitoring has no receivers: alerts fire in Prometheus and Alertmanager but "
            "reach no one",
            ("monitoring",),
            severity="warning",
            hint="add monitoring.receivers (a webhook URL or an email address), or suppress "
            "with a reason",
        )


def _routes(plan: Plan, routes: dict[str, Any], receivers: dict[str, Any]) -> Iterator[Finding]:
    teams = plan.get("teams") or {}
    for name, route in routes.items():
        if not isinstance(route, dict):
            continue
        if route.get("receiver") not in receivers:
            yield Finding(
                "unknown-receiver",
                f"route {name} sends to {route.get('receiver')!r}, which is not a receiver of "
                "monitoring.receivers",
                ("monitoring", "routes", name, "receiver"),
                hint=_known(receivers),
            )
        team = route.get("team")
        if team is not None and team not in teams:
            yield Finding(
                "unknown-team",
                f"route {name} is for team {team!r}, which the plan does not have",
                ("monitoring", "routes", name, "team"),
                hint=f"teams: {', '.join(teams) or 'none'}",
            )


def _known(receivers: dict[str, Any]) -> str:
    return f"receivers: {', '.join(receivers) or 'none yet'}"
