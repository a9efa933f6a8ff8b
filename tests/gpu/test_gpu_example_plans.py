"""Every shipped plan's GPU hosts get a driver on the plan's OS, and the choice is as expected."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_plan.api import load_expanded
from cluster_plan.gpu.driver_select import choice_for_host

REPO = Path(__file__).resolve().parents[2]
PLANS = [*sorted((REPO / "inventory/examples").glob("*.yml")), REPO / "inventory/lab/cluster.yml"]
ROLE_VARS = REPO / "roles/nvidia_driver/vars"
OS_VARS = {
    "debian": "Debian.yml",
    "ubuntu": "Ubuntu.yml",
    "rocky": "RedHat.yml",
    "rhel": "RedHat.yml",
    "almalinux": "RedHat.yml",
}

# (plan, model) -> (branch, kernel modules, fabric manager); None: no NVIDIA driver.
EXPECTED: dict[tuple[str, str], tuple[int, str, bool] | None] = {
    ("slurm-h100", "H100-SXM5-80GB"): (580, "open", True),
    ("k8s-inference", "L40S"): (580, "open", False),
    ("k8s-inference", "tpu"): None,
    ("large-training", "H100-SXM5-80GB"): (580, "open", True),
    ("cluster", "H100-PCIE-80GB"): (535, "proprietary", False),  # Debian 12 non-free: 535
    ("cluster", "tpu"): None,
}


def os_offer(os_name: str) -> tuple[list[int], str]:
    family = os_name.split("-")[0]
    data: dict[str, Any] = yaml.safe_load((ROLE_VARS / OS_VARS[family]).read_text())
    return data["nvidia_driver_os_branches"], data["nvidia_driver_os_source"]


@cache
def choices() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for plan in PLANS:
        expanded = load_expanded(str(plan))
        offered, source = os_offer(expanded["cluster"]["os"])
        for host in expanded["hosts"].values():
            accelerators = host.get("accelerators")
            if accelerators:
                found[(plan.stem, accelerators["model"])] = choice_for_host(
                    accelerators,
                    pin=accelerators.get("driver_branch"),
                    available_branches=offered,
                    source_name=source,
                )
    return found


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=["/".join(k) for k in sorted(EXPECTED)])
def test_example_plan_driver_choice(key: tuple[str, str]) -> None:
    choice = choices()[key]
    assert choice["refusal"] is None
    expected = EXPECTED[key]
    if expected is None:
        assert choice["install"] is False
    else:
        assert (choice["branch"], choice["kernel_modules"], choice["fabric_manager"]) == expected


def test_every_accelerator_in_the_shipped_plans_is_covered() -> None:
    assert set(choices()) == set(EXPECTED)
