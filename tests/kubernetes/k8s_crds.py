"""Strict offline validation of prometheus-operator's custom resources (PrometheusRule,
ServiceMonitor) against the CRDs vendored in schemas/kubernetes/prometheus-operator/.

The CRDs' openAPIV3Schema of the served version is checked as JSON Schema, made strict the way
an API server with `fieldValidation=Strict` treats a structural schema: an object with
`properties` and no `x-kubernetes-preserve-unknown-fields` refuses every other field. The CRDs
leave `metadata` as a bare object, so it is checked as the ObjectMeta of the plan's pinned
Kubernetes version (strictly, with kubernetes-validate). Not checked: the CRDs' CEL rules
(`x-kubernetes-validations`) and string formats."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import ValidationError

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "schemas" / "kubernetes" / "prometheus-operator"


def strict(node: Any) -> Any:
    """A copy of an OpenAPI schema in which objects with properties refuse unknown fields."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict(value) for key, value in node.items()}
    keeps_unknown = node.get("x-kubernetes-preserve-unknown-fields") is True
    if "properties" in node and "additionalProperties" not in node and not keeps_unknown:
        out["additionalProperties"] = False
    return out


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the strict schema of each served version of each vendored CRD."""
    out = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        for version in spec["versions"]:
            if version["served"]:
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                out[key] = strict(version["schema"]["openAPIV3Schema"])
    return out


def metadata_problems(obj: dict[str, Any], version: str) -> list[str]:
    """The object's metadata as ObjectMeta, by way of a ConfigMap that carries it."""
    holder = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": copy.deepcopy(obj["metadata"])}
    try:
        kubernetes_validate.validate(holder, version, strict=True)
    except ValidationError as exc:
        return [f"{'.'.join(map(str, exc.path))}: {exc.message}"]
    return [] if obj["metadata"].get("namespace") else ["metadata: no namespace"]


def crd_problems(obj: dict[str, Any], version: str) -> list[str]:
    """Every problem of one custom resource; an apiVersion and kind no vendored CRD serves is
    one."""
    where = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
    schema = crd_schemas().get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if schema is None:
        return [f"{where}: no vendored CRD serves {obj.get('apiVersion')} {obj.get('kind')}"]
    validator = jsonschema.Draft7Validator(schema)
    problems = [
        f"{where}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(obj)
    ]
    if isinstance(obj.get("metadata"), dict):
        problems += [f"{where}: {p}" for p in metadata_problems(obj, version)]
    return problems


def is_custom(obj: dict[str, Any]) -> bool:
    return obj["apiVersion"].startswith("monitoring.coreos.com/")
