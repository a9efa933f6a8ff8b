"""Fixtures of the Kubernetes tests: the plans that become clusters, rendered once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from k8s_plans import PLANS, expanded_plan

from cluster_plan.kubernetes import Rendering, render

_RENDERED: dict[str, Rendering] = {}


def rendered(name: str) -> Rendering:
    if name not in _RENDERED:
        _RENDERED[name] = render(expanded_plan(name))
    return _RENDERED[name]


@pytest.fixture(params=sorted(PLANS))
def rendering(request: pytest.FixtureRequest) -> Rendering:
    """Each Kubernetes plan, rendered (shared: do not change it)."""
    return rendered(request.param)
