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


# The most one GPU exchanges with the other GPUs of its node, both directions together, in
# GB/s: an all-reduce within a node cannot beat it. NVLink per GPU by generation (NVIDIA's
# datasheets: V100 SXM2 300, A100 SXM 600, H100/H200 SXM 900, B200 1,800); a card's PCIe x16
# slot by generation (Gen3 32, Gen4 64, Gen5 128: T4; A10, A100 PCIe, L4, L40S; H100 PCIe);
# an NVLink bridge joining two A100 or H100 PCIe cards 600.
_NVLINK_GBPS = {"volta": 300.0, "ampere": 600.0, "hopper": 900.0, "blackwell": 1800.0}
_PCIE_GBPS = {"turing": 32.0, "ampere": 64.0, "ada": 64.0, "hopper": 128.0}
_BRIDGE_GBPS = 600.0


def gpu_link_ceiling_GBps(model: str, count: int) -> float | None:
    """What one GPU of a node of ``count`` x ``model`` can exchange with the others at most
    (None when the catalog cannot tell): the ceiling of an intra-node all-reduce."""
    entry = load_catalog().get(model) or {}
    architecture = entry.get("architecture")
    if entry.get("interconnect") == "nvlink":
        return _NVLINK_GBPS.get(str(architecture))
    pcie = _PCIE_GBPS.get(str(architecture))
    bridge = entry.get("nvlink_bridge")
    if pcie is not None and bridge and count <= bridge:
        return max(pcie, _BRIDGE_GBPS)  # a bridge may join them
    return pcie
