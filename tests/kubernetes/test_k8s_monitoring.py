"""The monitoring of a Kubernetes plan as prometheus-operator objects: the same rules as the
monitoring server's rule file, the same targets and labels as its file_sd files, every object
validated offline and strictly (core objects with kubernetes-validate, PrometheusRule and
ServiceMonitor against the vendored CRDs), and every rule checked by promtool."""

from __future__ import annotations

import copy
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from k8s_crds import CRDS, crd_problems, crd_schemas, is_custom
from k8s_plans import PLANS, expanded_plan, rendered
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

from cluster_plan.kubernetes import files, render
from cluster_plan.kubernetes.monitoring import NAMESPACE, NODE_LABELS, annotation
from cluster_plan.monitoring import render as monitoring_render
from cluster_plan.monitoring.targets import RULES_FILE, ceph_targets, node_targets

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "monitoring"))
from monitoring_tools import need

PROMTOOL = shutil.which("promtool")
MONITORED = sorted(name for name in PLANS if expanded_plan(name)["monitoring"] is not None)
VERSION = "1.36"


def problems(objects: list[dict[str, Any]], version: str = VERSION) -> list[str]:
    out = []
    for obj in objects:
        if is_custom(obj):
            out += crd_problems(obj, version)
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except (ValidationError, SchemaNotFoundError) as exc:
            out.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    return out


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_a_plan_with_monitoring_is_among_the_kubernetes_plans():
    assert {"k8s-inference", "lab-as-kubernetes", "lab-k8s"} <= set(MONITORED)
    # no monitoring section: no monitoring files
    unwatched = expanded_plan("lab-k8s")
    unwatched["monitoring"] = None
    rendering = render(unwatched)
    assert rendering.monitoring == {}
    assert not any(rel.startswith("monitoring/") for rel in files(rendering))
    assert rendered("lab-k8s").monitoring != {}


@pytest.mark.parametrize("plan", MONITORED)
def test_every_monitoring_object_validates_strictly(plan):
    rendering = rendered(plan)
    objects = rendering.monitoring_objects()
    kinds = {o["kind"] for o in objects}
    assert {"Namespace", "Service", "EndpointSlice", "ServiceMonitor", "PrometheusRule"} <= kinds
    assert problems(objects, rendering.plan.release.minor) == []
    assert {o["metadata"].get("namespace", NAMESPACE) for o in objects} == {NAMESPACE}


@pytest.mark.parametrize("plan", MONITORED)
def test_the_rules_are_the_monitoring_server_s(plan):
    expanded = expanded_plan(plan)
    server = yaml.safe_load(monitoring_render.render(expanded)[RULES_FILE])
    rules = of_kind(rendered(plan).monitoring_objects(), "PrometheusRule")
    assert len(rules) == len(server["groups"])  # one object per group
    groups = [g for obj in rules for g in obj["spec"]["groups"]]
    assert [g["name"] for g in groups] == [g["name"] for g in server["groups"]]
    assert sum(len(g["rules"]) for g in groups) == sum(len(g["rules"]) for g in server["groups"])
    assert [g["rules"] for g in groups] == [g["rules"] for g in server["groups"]]
    interval = f"{expanded['monitoring']['evaluation_interval_s']}s"
    assert {g["interval"] for g in groups} == {interval}


def endpoints(objects: list[dict[str, Any]], app: str) -> dict[str, dict[str, str]]:
    """address -> the labels the ServiceMonitor gives it, from its Service's annotations."""
    services = {
        o["metadata"]["name"]: o["metadata"].get("annotations", {})
        for o in of_kind(objects, "Service")
        if o["metadata"]["labels"]["app.kubernetes.io/name"] == app
    }
    out = {}
    for piece in of_kind(objects, "EndpointSlice"):
        if piece["metadata"]["labels"]["app.kubernetes.io/name"] != app:
            continue
        notes = services[piece["metadata"]["labels"]["kubernetes.io/service-name"]]
        port = piece["ports"][0]["port"]
        for endpoint in piece["endpoints"]:
            (address,) = endpoint["addresses"]
            labels = {k: notes[annotation(k)] for k in NODE_LABELS if annotation(k) in notes}
            out[f"{address}:{port}"] = {"node": endpoint["hostname"], **labels}
    return out


@pytest.mark.parametrize("plan", MONITORED)
def test_targets_and_labels_are_the_file_sd_ones(plan):
    expanded = expanded_plan(plan)
    objects = rendered(plan).monitoring_objects()
    file_sd = {t["targets"][0]: t["labels"] for t in node_targets(expanded)}
    assert endpoints(objects, "node-exporter") == file_sd
    ceph = {t["targets"][0]: {"node": t["labels"]["mgr"]} for t in ceph_targets(expanded)}
    assert endpoints(objects, "ceph-mgr") == ceph
    monitors = {m["metadata"]["name"]: m for m in of_kind(objects, "ServiceMonitor")}
    assert set(monitors) == ({"node", "ceph"} if ceph else {"node"})
    node = monitors["node"]["spec"]["endpoints"][0]
    assert node["honorLabels"] is True
    assert node["interval"] == f"{expanded['monitoring']['scrape_interval_s']}s"
    targets = {r["targetLabel"] for r in node["relabelings"] if "targetLabel" in r}
    assert targets == {"node", "job", *NODE_LABELS}


def promtool_check(objects: list[dict[str, Any]], directory: Path) -> subprocess.CompletedProcess:
    groups = [g for obj in of_kind(objects, "PrometheusRule") for g in obj["spec"]["groups"]]
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    promtool = need(PROMTOOL, "prometheus")
    return subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("plan", MONITORED)
def test_promtool_accepts_the_rules_of_the_objects(plan, tmp_path):
    objects = rendered(plan).monitoring_objects()
    done = promtool_check(objects, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    count = sum(
        len(g["rules"]) for o in of_kind(objects, "PrometheusRule") for g in o["spec"]["groups"]
    )
    assert f"SUCCESS: {count} rules found" in done.stdout


def test_promtool_refuses_an_expression_that_does_not_parse(tmp_path):
    objects = copy.deepcopy(rendered("lab-as-kubernetes").monitoring_objects())
    rule = of_kind(objects, "PrometheusRule")[0]["spec"]["groups"][0]["rules"][0]
    rule["expr"] = 'up{job="node" == 0'
    done = promtool_check(objects, tmp_path)
    assert done.returncode != 0
    assert "parse error" in done.stdout + done.stderr


def broken(kind: str, change: Any) -> dict[str, Any]:
    objects = copy.deepcopy(rendered("lab-as-kubernetes").monitoring_objects())
    obj = of_kind(objects, kind)[0]
    change(obj)
    return obj


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("PrometheusRule", lambda o: o["spec"].update(group=[])),  # unknown field at the top
        ("PrometheusRule", lambda o: o["spec"]["groups"][0]["rules"][0].update(severity="x")),
        ("PrometheusRule", lambda o: o["spec"]["groups"][0]["rules"][0].update({"for": "5 min"})),
        ("PrometheusRule", lambda o: o["spec"]["groups"][0]["rules"][0].pop("expr")),
        ("PrometheusRule", lambda o: o["metadata"].update(label={"a": "b"})),
        ("PrometheusRule", lambda o: o["metadata"]["labels"].update(tier=1)),
        ("ServiceMonitor", lambda o: o["spec"]["endpoints"][0].update(intervall="30s")),
        (
            "ServiceMonitor",
            lambda o: o["spec"]["endpoints"][0]["relabelings"][0].update(action="x"),
        ),
        ("ServiceMonitor", lambda o: o["spec"].pop("selector")),
        ("ServiceMonitor", lambda o: o["spec"].update(serviceDiscoveryRole="Pods")),
        ("ServiceMonitor", lambda o: o["metadata"].pop("namespace")),
        ("ServiceMonitor", lambda o: o.update(apiVersion="monitoring.coreos.com/v2")),
        ("EndpointSlice", lambda o: o["endpoints"][0].update(address="10.0.0.1")),
        ("Service", lambda o: o["spec"]["ports"][0].update(prot=1)),
    ],
)
def test_a_broken_object_is_refused(kind, change):
    assert problems([broken(kind, change)]) != []


def test_the_validator_refuses_unknown_fields_at_every_depth():
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "r", "namespace": "n"},
        "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0"}]}]},
    }
    assert crd_problems(rule, VERSION) == []
    for where in (
        rule,
        rule["spec"],
        rule["spec"]["groups"][0],
        rule["spec"]["groups"][0]["rules"][0],
    ):
        where["unknown"] = 1
        assert any("unknown" in p for p in crd_problems(rule, VERSION)), where
        del where["unknown"]
    assert crd_problems({**rule, "kind": "PodMonitor"}, VERSION) != []  # not vendored


def test_the_vendored_crds_are_the_recorded_ones_and_strict():
    readme = (CRDS / "README.md").read_text()
    vendored = sorted(CRDS.glob("*.yaml"))
    assert [p.name for p in vendored] == [
        "monitoring.coreos.com_prometheusrules.yaml",
        "monitoring.coreos.com_servicemonitors.yaml",
    ]
    for path in vendored:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert re.search(rf"{re.escape(path.name)}.*{digest}", readme), path.name
        crd = yaml.safe_load(path.read_text())
        assert crd["metadata"]["annotations"]["operator.prometheus.io/version"] in readme
    for schema in crd_schemas().values():
        assert schema["additionalProperties"] is False
        assert schema["properties"]["spec"]["additionalProperties"] is False


def test_a_gpu_node_is_scraped_with_its_gpu_collector():
    """The GPU collector is a textfile of node_exporter: each GPU node is a node job target
    whose node group is the one its GpuMissing rule selects."""
    expanded = expanded_plan("lab-as-kubernetes")
    hosts = expanded["hosts"].values()
    gpu = {h["address"] for h in hosts if (h["accelerators"] or {}).get("kind") == "gpu"}
    found = endpoints(rendered("lab-as-kubernetes").monitoring_objects(), "node-exporter")
    objects = of_kind(rendered("lab-as-kubernetes").monitoring_objects(), "PrometheusRule")
    rules = [r for o in objects for g in o["spec"]["groups"] for r in g["rules"]]
    missing = {r["labels"]["node_group"] for r in rules if r["alert"] == "GpuMissing"}
    assert gpu and {found[f"{address}:9100"]["node_group"] for address in gpu} == missing
