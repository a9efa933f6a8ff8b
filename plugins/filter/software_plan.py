"""Ansible filters for the software role: what a host installs, from
cluster_plan.software.role_view (pure functions, unit-tested there). This only adapts."""

from __future__ import annotations

from typing import Any

from cluster_plan.software import role_view


class FilterModule:
    """Ansible filters; see each function's docstring in cluster_plan.software.role_view."""

    def filters(self) -> dict[str, Any]:
        return {
            "software_in_image": role_view.software_in_image,
            "software_host_builds": role_view.software_host_builds,
            "software_packages": role_view.software_packages,
            "software_pip_builds": role_view.software_pip_builds,
            "software_modules": role_view.software_modules,
            "software_pip_installs": role_view.software_pip_installs,
        }
