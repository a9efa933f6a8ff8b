from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
# The lab plan expanded, as the golden test keeps it current (tests/plans/test_golden.py).
GOLDEN_LAB = Path(__file__).parents[1] / "plans" / "golden" / "lab.expanded.json"


@pytest.fixture
def expanded_lab() -> dict[str, Any]:
    """The lab plan expanded: the golden file, one copy for every test that needs it."""
    loaded: dict[str, Any] = json.loads(GOLDEN_LAB.read_text())
    return loaded
