"""Who is scraped, and with which labels: every node's node_exporter, the Ceph managers'
prometheus module, and the monitoring server's own Prometheus and Alertmanager."""

from __future__ import annotations

from typing import Any

from cluster_plan.plan.contract import ExpandedPlan, Host

NODE_EXPORTER_PORT = 9100
CEPH_MGR_PORT = 9283
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
TARGETS_DIR = "file_sd"
RULES_FILE = "rules/cluster-plan.rules.yml"


def monitoring_server(plan: ExpandedPlan) -> Host | None:
    """The host with the role monitoring_server (validate allows one), None without one."""
    names = plan["groups"].get("monitoring_server") or []
    return plan["hosts"][names[0]] if names else None


def team_pools(plan: ExpandedPlan) -> dict[str, set[str]]:
    """Team -> the pools its workload classes run on."""
    scheduler = plan["scheduler"]
    classes = scheduler["workload_classes"] if scheduler else {}
    return {
        team: {classes[c]["pool"] for c in spec["classes"] if c in classes}
        for team, spec in plan["teams"].items()
    }


def node_labels(plan: ExpandedPlan, host: Host) -> dict[str, str]:
    """The labels every series of a node carries: the plan host, its group and rack, and its
    pool and the teams whose classes run there (`,a,b,`, so that a route can match one team
    with `teams=~".*,a,.*"`)."""
    labels = {"node": host["hostname"], "node_group": host["node_group"]}
    if host["rack"]:
        labels["rack"] = host["rack"]
    if host["pool"]:
        labels["pool"] = host["pool"]
        teams = [t for t, pools in team_pools(plan).items() if host["pool"] in pools]
        if teams:
            labels["teams"] = "," + ",".join(teams) + ","
    return labels


def node_targets(plan: ExpandedPlan) -> list[dict[str, Any]]:
    return [
        {"targets": [f"{host['address']}:{NODE_EXPORTER_PORT}"], "labels": node_labels(plan, host)}
        for host in plan["hosts"].values()
    ]


def ceph_targets(plan: ExpandedPlan) -> list[dict[str, Any]]:
    """Every Ceph manager: only the active one answers with metrics, the standbys with none."""
    if not plan["storage"].get("ceph"):
        return []
    return [
        {
            "targets": [f"{plan['hosts'][name]['address']}:{CEPH_MGR_PORT}"],
            "labels": {"mgr": name},
        }
        for name in plan["groups"].get("ceph_mgr", [])
    ]


def target_files(plan: ExpandedPlan) -> dict[str, list[dict[str, Any]]]:
    """file_sd file (relative to prometheus.yml) -> its target groups."""
    files = {f"{TARGETS_DIR}/node.json": node_targets(plan)}
    ceph = ceph_targets(plan)
    if ceph:
        files[f"{TARGETS_DIR}/ceph.json"] = ceph
    return files


def prometheus_config(plan: ExpandedPlan) -> dict[str, Any]:
    """prometheus.yml. Paths are relative to it: the role installs the rendered directory
    as a whole. The node job honours the exporters' own `node` label, so that a collector on
    the controller that reports on other nodes (Slurm, backups) names those nodes."""
    monitoring = plan["monitoring"]
    server = monitoring_server(plan)
    if monitoring is None or server is None:
        raise ValueError("the plan has no monitoring server")
    files = target_files(plan)
    jobs: list[dict[str, Any]] = [
        {
            "job_name": "prometheus",
            "static_configs": [
                {
                    # the address it listens on (the role: management only)
                    "targets": [f"{server['address']}:{PROMETHEUS_PORT}"],
                    "labels": {"node": server["hostname"]},
                }
            ],
        },
        {
            "job_name": "node",
            "honor_labels": True,
            "file_sd_configs": [{"files": [f"{TARGETS_DIR}/node.json"]}],
        },
    ]
    if f"{TARGETS_DIR}/ceph.json" in files:
        jobs.append(
            {
                "job_name": "ceph",
                "honor_labels": True,  # the module's own instance labels (Ceph's advice)
                "file_sd_configs": [{"files": [f"{TARGETS_DIR}/ceph.json"]}],
            }
        )
    return {
        "global": {
            "scrape_interval": f"{monitoring['scrape_interval_s']}s",
            "evaluation_interval": f"{monitoring['evaluation_interval_s']}s",
            "external_labels": {"cluster": plan["cluster"]["name"]},
        },
        "rule_files": [RULES_FILE],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [f"localhost:{ALERTMANAGER_PORT}"]}]}]
        },
        "scrape_configs": jobs,
    }
