"""Label keys and values of every rendered object, checked as the API server checks them
(apimachinery's validation: IsQualifiedName for keys, IsValidLabelValue for values). The
OpenAPI schemas the other object tests validate against say only "a map of strings", so a
value the API server refuses passed them: the EndpointSlices' `managed-by` label was one
(tests/kubernetes/test_k8s_apiserver.py found it applying the objects to a real server)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from k8s_plans import PLANS, rendered

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def key_problems(key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    problems = []
    if not name or len(name) > 63 or not _NAME.match(name):
        problems.append(f"label key {key!r}: its name part is not a qualified name")
    if "/" in key and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        problems.append(f"label key {key!r}: its prefix is not a DNS subdomain")
    return problems


def value_problems(key: str, value: Any) -> list[str]:
    if not isinstance(value, str):
        return [f"label {key}: value {value!r} is not a string"]
    if value and (len(value) > 63 or not _NAME.match(value)):
        return [f"label {key}: value {value!r} is not a valid label value"]
    return []


def label_maps(obj: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every `labels`, `matchLabels` and `nodeSelector` map under an object."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            where = f"{path}.{key}"
            if key in ("labels", "matchLabels", "nodeSelector") and isinstance(value, dict):
                yield where, value
            else:
                yield from label_maps(value, where)
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from label_maps(item, f"{path}[{i}]")


def label_problems(obj: dict[str, Any]) -> list[str]:
    name = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
    return [
        f"{name}{where}: {problem}"
        for where, labels in label_maps(obj)
        for key, value in labels.items()
        for problem in key_problems(str(key)) + value_problems(str(key), value)
    ]


def every_object(plan: str) -> list[dict[str, Any]]:
    rendering = rendered(plan)
    pods = [pod for pods in rendering.static_pods.values() for pod in pods]
    return [
        *rendering.all_objects(),
        *rendering.monitoring_objects(),
        *rendering.example_objects(),
        *pods,
    ]


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_label_is_one_the_api_server_accepts(plan: str) -> None:
    objects = every_object(plan)
    assert objects
    assert [p for obj in objects for p in label_problems(obj)] == []


def test_the_label_check_finds_what_the_api_server_refuses() -> None:
    slice_ = {
        "kind": "EndpointSlice",
        "metadata": {
            "name": "s",
            "labels": {
                "endpointslice.kubernetes.io/managed-by": "example.com/x",
                "Bad_Prefix/name": "ok",
                "ok": "-starts-with-dash",
                "long": "x" * 64,
                "fine.example/name": "",
            },
        },
        "spec": {"selector": {"matchLabels": {"a/b/c": "v"}}},
    }
    assert label_problems(slice_) == [
        "EndpointSlice/s.metadata.labels: label endpointslice.kubernetes.io/managed-by: "
        "value 'example.com/x' is not a valid label value",
        "EndpointSlice/s.metadata.labels: label key 'Bad_Prefix/name': its prefix is not a "
        "DNS subdomain",
        "EndpointSlice/s.metadata.labels: label ok: value '-starts-with-dash' is not a valid "
        "label value",
        "EndpointSlice/s.metadata.labels: label long: value '" + "x" * 64 + "' is not a valid "
        "label value",
        "EndpointSlice/s.spec.selector.matchLabels: label key 'a/b/c': its prefix is not a "
        "DNS subdomain",
    ]
