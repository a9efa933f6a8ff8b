"""The Kubernetes collector's families as samples a test looks up by name and labels."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from cluster_plan.exporters.textfile import exposition

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(families: list[Any]) -> Samples:
    """(name, labels) -> value of every sample, read back from the exposition text."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(exposition(families))
        for s in f.samples
    }


def at(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    """The key of cluster_plan_kubernetes_NAME with these labels."""
    return (f"cluster_plan_kubernetes_{name}", frozenset(labels.items()))
