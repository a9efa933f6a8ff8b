"""Ansible filter for the common role's nftables firewall: the services the plan confines to
some of its networks, from cluster_plan.network.firewall (pure, unit-tested there). This only
adapts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

try:
    from cluster_plan.network import firewall
except ImportError:  # run from a checkout where the package is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from cluster_plan.network import firewall


class FilterModule:
    """Ansible filters; see each function's docstring in cluster_plan.network.firewall."""

    def filters(self) -> dict[str, Any]:
        return {"common_restricted_services": firewall.common_restricted_services}
