"""Fixtures of the role tests: the lab plan, expanded by the core, as the roles see it."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "filter"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "modules"))

from cluster_plan.api import load_expanded

ROOT = Path(__file__).resolve().parents[2]
LAB_PLAN = ROOT / "inventory" / "lab" / "cluster.yml"

_CACHE: dict[str, Any] = {}


@pytest.fixture
def lab_expanded() -> dict[str, Any]:
    """A fresh copy of the expanded lab plan (tests may change it)."""
    if "lab" not in _CACHE:
        _CACHE["lab"] = load_expanded(str(LAB_PLAN))
    return copy.deepcopy(_CACHE["lab"])
