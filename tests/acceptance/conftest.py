from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def expanded_lab() -> dict[str, Any]:
    """The lab plan expanded (recorded from cluster_plan.api.load_expanded)."""
    loaded: dict[str, Any] = json.loads((FIXTURES / "expanded_lab.json").read_text())
    return loaded
