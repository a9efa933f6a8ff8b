"""The Kubernetes rules of a Kubernetes plan (inventory/examples/k8s-inference.yml) under
`promtool test rules`, as tests/monitoring/test_monitoring_rules.py holds the others: every
rule of the `cluster-plan-kubernetes` group fires with its labels and summary when its fault
lasts, and stays quiet when it does not (or not long enough); the Kubernetes collector's
failure reaches CollectorFailing. The plan's facts (hosts, addresses, labels, waits) are
written here by hand from the plan file.

The collector runs on the first control plane (cp1): its series about other nodes carry cp1's
target labels, and the alerts take the node's own group, rack, pool and teams from its `up`
series, as the Slurm collector's alerts do."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitoring_tools import need
from test_monitoring_rules import Cases, Facts, briefly, promtool_test, rules_of, runbook_of

from cluster_plan.api import load_expanded
from cluster_plan.monitoring.render import render, write
from cluster_plan.monitoring.rules import alert_rules

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
PLAN = ROOT / "inventory" / "examples" / "k8s-inference.yml"
GROUP = "cluster-plan-kubernetes"

INFER = Facts(
    plan="inventory/examples/k8s-inference.yml",
    cluster="infer",
    gpu_node="l40s-01",
    gpu_address="10.60.0.19",
    gpu_rack="r01",
    gpu_teams=",search,assistants,assistants-eval,",
    gpus=4,
    model="L40S",
    head="cp1",
    head_address="10.60.0.16",
    head_rack="r01",
    fast_device="eno1",
    fast_mtu=1500,
    gbps=1,
    slow="12.5MB/s",
    max_temp_c=85,
    backup_hours=0,
    ceph=False,
    node_down_minutes=2,
    node_down_for="2m",
    clock_minutes=10,
    drained_minutes=10,
    time_reference=False,
)
NOT_READY_MINUTES = 5  # monitoring.alert_after_minutes.k8s_not_ready, the default
APISERVER_MINUTES = 2  # monitoring.alert_after_minutes.k8s_apiserver, the default
TPU = {"job": "node", "instance": "10.60.0.31:9100", "node": "tpu-01", "node_group": "tpu",
       "rack": "r02", "pool": "accel", "teams": ",assistants,"}  # fmt: skip


def control_plane() -> dict[str, str]:
    """cp1's node_exporter target, where the Kubernetes collector writes."""
    return {
        "job": "node",
        "instance": f"{INFER.head_address}:9100",
        "node": INFER.head,
        "node_group": "control",
        "rack": INFER.head_rack,
    }


def own(target: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in target.items() if k not in ("job", "instance")}


def ready(node: str, true: str, unknown: str) -> list[tuple[str, dict[str, str], str]]:
    """The collector's Ready series of a node: its status true, and unknown (a kubelet that
    stopped reporting)."""
    about = {**control_plane(), "node": node}
    return [
        ("cluster_plan_kubernetes_node_ready", {**about, "status": "true"}, true),
        ("cluster_plan_kubernetes_node_ready", {**about, "status": "unknown"}, unknown),
        ("cluster_plan_kubernetes_node_ready", {**about, "status": "false"}, "0x13"),
    ]


def kubernetes_cases(c: Cases) -> None:
    gpu = c.gpu_target()
    up = ("up", gpu, "1x13")
    c.fires(
        "KubernetesNodeNotReady",
        [*ready(INFER.gpu_node, "1x3 0x10", "0x3 1x10"), up],
        "13m",
        {**own(gpu), "severity": "critical"},
        f"Kubernetes node {INFER.gpu_node} is not Ready: its kubelet has not reported Ready "
        f"for {NOT_READY_MINUTES}m",
    )
    c.quiet_when("KubernetesNodeNotReady", [*ready(INFER.gpu_node, "1x13", "0x13"), up], "13m")
    c.quiet_when(  # a kubelet restart: not Ready for less than the plan's wait
        "KubernetesNodeNotReady",
        [
            *ready(
                INFER.gpu_node,
                briefly(0, 1, 13, NOT_READY_MINUTES),
                briefly(1, 0, 13, NOT_READY_MINUTES),
            ),
            up,
        ],
        "13m",
    )
    cp = control_plane()
    c.fires(
        "KubernetesAPIServerDown",
        [("cluster_plan_kubernetes_apiserver_up", cp, "1x3 0x10")],
        "13m",
        {**cp, "severity": "critical"},
        "The Kubernetes API server does not answer /readyz with ok, asked from "
        f"{INFER.head} for {APISERVER_MINUTES}m",
    )
    c.quiet_when(
        "KubernetesAPIServerDown",
        [("cluster_plan_kubernetes_apiserver_up", cp, briefly(0, 1, 13, APISERVER_MINUTES))],
        "13m",
    )
    held = {**cp, "node": "tpu-01", "resource": "cluster-plan.io/tpu"}
    c.fires(
        "KubernetesAcceleratorsOverAllocated",
        [
            ("cluster_plan_kubernetes_node_allocatable", held, "4x3 2x10"),
            ("cluster_plan_kubernetes_node_allocated", held, "4x13"),
            ("up", TPU, "1x13"),
        ],
        "13m",
        {**own(TPU), "resource": "cluster-plan.io/tpu", "severity": "warning"},
        "Pods on tpu-01 hold 4 cluster-plan.io/tpu, more than the node offers now",
    )
    c.quiet_when(  # everything offered is held: full, not over
        "KubernetesAcceleratorsOverAllocated",
        [
            ("cluster_plan_kubernetes_node_allocatable", held, "4x13"),
            ("cluster_plan_kubernetes_node_allocated", held, "4x13"),
            ("up", TPU, "1x13"),
        ],
        "13m",
    )
    c.quiet_when(  # a device plugin restarting: fewer offered for less than 5 minutes
        "KubernetesAcceleratorsOverAllocated",
        [
            ("cluster_plan_kubernetes_node_allocatable", held, briefly(2, 4, 13, 5)),
            ("cluster_plan_kubernetes_node_allocated", held, "4x13"),
            ("up", TPU, "1x13"),
        ],
        "13m",
    )
    collector = {**cp, "collector": "kubernetes"}
    c.fires(
        "CollectorFailing",
        [("cluster_plan_collector_success", collector, "0x20")],
        "20m",
        {**collector, "severity": "warning"},
        f"The kubernetes collector on {INFER.head} failed its last run",
    )
    c.quiet_when("CollectorFailing", [("cluster_plan_collector_success", collector, "1x20")], "20m")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("infer")
    write(render(load_expanded(PLAN)), directory)
    return directory


def test_every_kubernetes_rule_fires_and_stays_quiet_under_promtool(rendered: Path) -> None:
    promtool = need(PROMTOOL, "prometheus")
    document = yaml.safe_load((rendered / "rules" / "cluster-plan.rules.yml").read_text())
    (group,) = [g for g in document["groups"] if g["name"] == GROUP]
    names = {rule["alert"] for rule in group["rules"]}
    runbooks = {r["alert"]: runbook_of(r) for r in rules_of(rendered)}
    cases = Cases(INFER, runbooks)
    kubernetes_cases(cases)
    assert names == cases.fired - {"CollectorFailing"}, names ^ cases.fired
    assert names == cases.quiet - {"CollectorFailing"}, names ^ cases.quiet
    done = promtool_test(promtool, rendered / "kubernetes.test.yml", cases.groups(), "1m")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def _groups(plan: Path) -> dict[str, list[dict[str, Any]]]:
    return {g["name"]: g["rules"] for g in alert_rules(load_expanded(plan))["groups"]}


def test_a_kubernetes_plan_has_kubernetes_rules_and_a_slurm_plan_slurm_rules() -> None:
    infer = _groups(PLAN)
    assert [r["alert"] for r in infer[GROUP]] == [
        "KubernetesNodeNotReady",
        "KubernetesAPIServerDown",
        "KubernetesAcceleratorsOverAllocated",
    ]
    assert "cluster-plan-slurm" not in infer
    slurm = _groups(ROOT / "inventory" / "examples" / "slurm-h100.yml")
    assert "cluster-plan-slurm" in slurm
    assert GROUP not in slurm


def test_the_plan_s_waits_set_the_rules_for(tmp_path: Path) -> None:
    """alert_after_minutes.k8s_not_ready and k8s_apiserver, as the lab plan would set them."""
    expanded = load_expanded(PLAN)
    expanded["monitoring"]["alert_after_minutes"].update(k8s_not_ready=0.25, k8s_apiserver=0.5)
    (group,) = [g for g in alert_rules(expanded)["groups"] if g["name"] == GROUP]
    waits = {r["alert"]: r["for"] for r in group["rules"]}
    assert waits["KubernetesNodeNotReady"] == "15s"
    assert waits["KubernetesAPIServerDown"] == "30s"
