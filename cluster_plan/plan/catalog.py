"""The accelerator catalog: GPU models and the driver branches that support them."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml


@cache
def _catalog_document() -> dict[str, Any]:
    text = resources.files("cluster_plan").joinpath("data/accelerators.yaml").read_text()
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def load_catalog() -> dict[str, dict[str, Any]]:
    """Accelerator models keyed by catalog name (e.g. ``H100-SXM5-80GB``)."""
    models: dict[str, dict[str, Any]] = _catalog_document()["models"]
    return models


def driver_branches() -> dict[int, dict[str, Any]]:
    """NVIDIA driver branches, newest last, with the architectures each supports."""
    branches: dict[int, dict[str, Any]] = _catalog_document()["driver_branches"]
    return dict(sorted(branches.items()))


def nvswitch_default(model: str, count: int) -> bool:
    """Whether a node with ``count`` GPUs of ``model`` has NVSwitch, unless the plan says: the
    catalog lists the board sizes that carry it (HGX 8-GPU does, HGX 4-GPU and DGX-1 do not)."""
    boards = load_catalog().get(model, {}).get("nvswitch_boards") or []
    return count in boards


def supports_mig(model: str) -> bool:
    """Whether GPUs of ``model`` can be partitioned into MIG instances."""
    return model in (_catalog_document().get("mig_models") or [])
