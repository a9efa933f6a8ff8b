"""Ansible filter for the common role's nftables firewall: the services the plan confines to
some of its networks, from cluster_plan.network.firewall (pure, unit-tested there). This only
adapts."""

from __future__ import annotations

from typing import Any

from cluster_plan.network import firewall


class FilterModule:
    """Ansible filters; see each function's docstring in cluster_plan.network.firewall."""

    def filters(self) -> dict[str, Any]:
        return {"common_restricted_services": firewall.common_restricted_services}
