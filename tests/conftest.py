"""Suite-wide pytest hooks."""

from __future__ import annotations

import os
from typing import Any

# Reservations are judged against "now"; the shipped plans' windows must not expire under the
# test suite, so every test (and every command it runs) sees the same instant.
os.environ["CLUSTER_PLAN_NOW"] = "2026-06-01T00:00:00+00:00"

# One lab per test session, shared by every module that needs it (brought up as id "test").
pytest_plugins = ["cluster_plan.lab.pytest_plugin"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A plain closing line that CI reads: 'N passed, N failed'."""
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    skipped = len(stats.get("skipped", []))
    terminalreporter.write_line(f"summary: {passed} passed, {failed} failed, {skipped} skipped")
