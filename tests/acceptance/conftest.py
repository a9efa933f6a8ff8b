from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

# The lab plan as `cluster-plan expand` gives it: tests/plans/test_golden.py keeps this file
# equal to the expansion of inventory/lab/cluster.yml, so it is never a stale second copy.
LAB_GOLDEN = Path(__file__).resolve().parents[1] / "plans" / "golden" / "lab.expanded.json"


@pytest.fixture
def expanded_lab() -> dict[str, Any]:
    """The lab plan expanded (a fresh copy: tests may change it)."""
    loaded: dict[str, Any] = json.loads(LAB_GOLDEN.read_text())
    return loaded
