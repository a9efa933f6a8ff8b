"""alertmanager.yml from the plan: its receivers, its routes by severity and team, and the
inhibition that keeps a node that is down from sending every other alert about it."""

from __future__ import annotations

from typing import Any

from cluster_plan.plan.contract import ExpandedPlan, Monitoring, MonitoringRoute

# Alertmanager needs a receiver for what no route takes; a plan without receivers gets one
# that sends nowhere (validate warns: alerts-unrouted).
NOBODY = "nobody"


def _receiver(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if spec.get("webhook"):
        out["webhook_configs"] = [{"url": spec["webhook"], "send_resolved": True}]
    if spec.get("email"):
        out["email_configs"] = [{"to": spec["email"], "send_resolved": True}]
    return out


def _route(route: MonitoringRoute) -> dict[str, Any]:
    matchers = []
    if route["severity"]:
        matchers.append(f'severity="{route["severity"]}"')
    if route["team"]:
        # the node's targets carry `teams` as ",a,b," (cluster_plan.monitoring.targets)
        matchers.append(f'teams=~".*,{route["team"]},.*"')
    out: dict[str, Any] = {"receiver": route["receiver"]}
    if matchers:
        out["matchers"] = matchers
    if route["continue"]:
        out["continue"] = True
    return out


def _global(monitoring: Monitoring) -> dict[str, Any]:
    smtp = monitoring["smtp"]
    if smtp is None:
        return {}
    return {"smtp_smarthost": f"{smtp['host']}:{smtp['port']}", "smtp_from": smtp["from"]}


def alertmanager_config(plan: ExpandedPlan) -> dict[str, Any]:
    monitoring = plan["monitoring"]
    if monitoring is None:
        raise ValueError("the plan has no monitoring section")
    receivers = [_receiver(name, dict(spec)) for name, spec in monitoring["receivers"].items()]
    default = monitoring["default_receiver"]
    if default is None:
        default = NOBODY
        receivers.append({"name": NOBODY})
    timing = monitoring["notifications"]
    config: dict[str, Any] = {
        "route": {
            "receiver": default,
            "group_by": ["alertname", "node"],
            "group_wait": f"{timing['group_wait_s']}s",
            "group_interval": f"{timing['group_interval_s']}s",
            "repeat_interval": f"{timing['repeat_interval_minutes']}m",
            "routes": [_route(r) for r in monitoring["routes"].values()],
        },
        "receivers": receivers,
        "inhibit_rules": [
            {
                "source_matchers": ['alertname="NodeDown"'],
                "target_matchers": ['alertname!="NodeDown"'],
                "equal": ["node"],
            },
            {
                "source_matchers": ['alertname="CephHealthError"'],
                "target_matchers": ['alertname="CephHealthWarning"'],
            },
        ],
    }
    settings = _global(monitoring)
    if settings:
        config = {"global": settings, **config}
    if not config["route"]["routes"]:
        del config["route"]["routes"]
    return config
