"""CEL literals for the expressions the admission policies are printed with."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def string(text: str) -> str:
    """A single-quoted CEL string literal."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


def string_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(string(i) for i in items) + "]"


def string_map(items: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{string(k)}: {string(v)}" for k, v in items.items()) + "}"


def int_map(items: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{string(k)}: {int(v)}" for k, v in items.items()) + "}"


def label(key: str) -> str:
    """`object.metadata.labels[key]`, for use after `has_label(key)`."""
    return f"object.metadata.labels[{string(key)}]"


def has_label(key: str) -> str:
    return f"(has(object.metadata.labels) && {string(key)} in object.metadata.labels)"


def label_or_empty(key: str) -> str:
    return f"{has_label(key)} ? {label(key)} : ''"


def asks_for(resource: str) -> str:
    """True when a container or init container requests or limits `resource`."""
    key = string(resource)
    per_container = (
        "has(c.resources) && (\n"
        f"  (has(c.resources.limits) && {key} in c.resources.limits) ||\n"
        f"  (has(c.resources.requests) && {key} in c.resources.requests))"
    )
    return (
        f"object.spec.containers.exists(c, {per_container}) ||\n"
        "(has(object.spec.initContainers) &&\n"
        f" object.spec.initContainers.exists(c, {per_container}))"
    )
