"""Fixtures of the Kubernetes tests: the plans that become clusters, rendered once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from k8s_plans import PLANS, rendered

from cluster_plan.kubernetes import Rendering


@pytest.fixture(params=sorted(PLANS))
def rendering(request: pytest.FixtureRequest) -> Rendering:
    """Each Kubernetes plan, rendered (shared: do not change it)."""
    return rendered(request.param)
