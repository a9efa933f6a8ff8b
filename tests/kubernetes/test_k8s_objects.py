"""Every rendered Kubernetes object, validated offline and strictly (an unknown field is an
error) against the OpenAPI schemas of the plan's pinned Kubernetes version, with
kubernetes-validate; kubeadm and kubelet configuration against the schemas in
schemas/kubernetes/, written from their published Go API types."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from k8s_plans import expanded_plan
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

from cluster_plan.kubernetes import render
from cluster_plan.kubernetes.versions import SUPPORTED

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas" / "kubernetes"
KUBEADM = json.loads((SCHEMAS / "kubeadm-v1beta4.schema.json").read_text())
KUBELET = json.loads((SCHEMAS / "kubelet-config-v1beta1.schema.json").read_text())
KUBE_PROXY = json.loads((SCHEMAS / "kube-proxy-config-v1alpha1.schema.json").read_text())


def api_problems(objects: list[dict[str, Any]], version: str) -> list[str]:
    problems = []
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            problems.append(f"{where}: {path}: {exc.message}")
        except SchemaNotFoundError as exc:  # the CLI only warns; here it is a failure
            problems.append(f"{where}: {exc.message}")
    return problems


def config_problems(document: dict[str, Any]) -> list[str]:
    schema = {"KubeletConfiguration": KUBELET, "KubeProxyConfiguration": KUBE_PROXY}.get(
        document["kind"], KUBEADM
    )
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{document['kind']}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(document)
    ]


def test_every_object_validates_against_the_pinned_version(rendering):
    objects = rendering.all_objects() + [p for ps in rendering.static_pods.values() for p in ps]
    objects += rendering.example_objects()  # not applied by the role, applied by users
    assert objects
    assert api_problems(objects, rendering.plan.release.minor) == []


def test_kubeadm_and_kubelet_configuration_validate(rendering):
    documents = [d for docs in rendering.kubeadm.values() for d in docs]
    documents += list(rendering.kubelet.values())
    kinds = {d["kind"] for d in documents}
    assert {"InitConfiguration", "ClusterConfiguration", "KubeletConfiguration"} <= kinds
    assert [p for d in documents for p in config_problems(d)] == []


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_supported_version_gets_objects_it_accepts(version):
    expanded = expanded_plan("lab-k8s")
    expanded["scheduler"]["kubernetes"]["version"] = version
    # the offline bundle has 1.36 and 1.37 only: the older ones install from upstream
    expanded["scheduler"]["kubernetes"]["mirror"] = None
    rendering = render(expanded)
    assert api_problems(rendering.all_objects() + rendering.example_objects(), version) == []
    kinds = [o["apiVersion"] for o in rendering.all_objects() if o["kind"].startswith("Mutating")]
    assert kinds and len(set(kinds)) == 1


def test_validation_is_strict():
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "x"},
        "value": 1,
    }
    assert api_problems([pc], "1.36") == []
    assert api_problems([{**pc, "valu": 2}], "1.36") != []
    # an API the version does not have is a failure, not a warning
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy"}
    assert api_problems([{**mutating, "metadata": {"name": "x"}, "spec": {}}], "1.33") != []
    init = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration"}
    assert config_problems(init) == []
    assert config_problems({**init, "nodeRegistraton": {}}) != []
    deep = copy.deepcopy(init)
    deep["nodeRegistration"] = {"taints": [{"key": "k", "effect": "Sometimes"}]}
    assert config_problems(deep) != []
    join = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "JoinConfiguration"}
    assert config_problems(join) != []  # discovery is required
    kubelet = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    assert config_problems({**kubelet, "cgroupDriver": "systemd"}) == []
    assert config_problems({**kubelet, "cgroupDrvier": "systemd"}) != []
    assert config_problems({**kubelet, "kubeReserved": {"memory": "lots"}}) != []


@pytest.mark.parametrize("schema", [KUBEADM, KUBELET], ids=["kubeadm", "kubelet"])
def test_config_schemas_are_valid_strict_and_name_their_source(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "types.go" in schema["description"]
    loose = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            # the kubeadm root only dispatches on `kind` to a strict definition
            strict = node.get("additionalProperties") is False
            if "properties" in node and node.get("type") == "object" and "allOf" not in node:
                loose.extend([] if strict else [path])
            for key, sub in node.items():
                walk(sub, f"{path}/{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{path}[{i}]")

    walk(schema, "#")
    assert loose == []
