"""Filter ``nvidia_driver_choice``: the driver for a host, from cluster_plan.gpu.driver_select."""

from __future__ import annotations

from typing import Any

from cluster_plan.gpu.driver_select import choice_for_host


def nvidia_driver_choice(
    accelerators: Any,
    pin: Any = None,
    kernel_modules: str = "auto",
    available_branches: Any = None,
    source_name: str = "this OS",
) -> dict[str, Any]:
    """``plan_host.accelerators`` -> {install, branch, kernel_modules, fabric_manager, ...}."""
    pin_branch = None if pin in (None, "", "None") else int(pin)
    offered = None if available_branches is None else [int(b) for b in available_branches]
    return choice_for_host(
        accelerators or None,
        pin=pin_branch,
        kernel_modules=str(kernel_modules),  # type: ignore[arg-type]
        available_branches=offered,
        source_name=str(source_name),
    )


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"nvidia_driver_choice": nvidia_driver_choice}
