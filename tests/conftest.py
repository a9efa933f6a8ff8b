"""Suite-wide pytest hooks, and the linters run once per session."""

from __future__ import annotations

import os
from typing import Any

import pytest
from linters import LintRun, run_ansible_lint, run_yamllint

# Reservations are judged against "now"; the shipped plans' windows must not expire under the
# test suite, so every test (and every command it runs) sees the same instant.
os.environ["CLUSTER_PLAN_NOW"] = "2026-06-01T00:00:00+00:00"

# One lab per test session, shared by every module that needs it (brought up as id "test");
# its prerequisites checked once (support/lab_gate.py); where the time goes (support/phases.py).
pytest_plugins = ["support.lab_session", "support.lab_gate", "support.phases"]


@pytest.fixture(scope="session")
def ansible_lint() -> LintRun:
    """ansible-lint's production profile over the whole tree, once: the tree test and every
    role's quality test read this one run."""
    return run_ansible_lint()


@pytest.fixture(scope="session")
def yamllint() -> LintRun:
    """yamllint -s over the whole tree, once."""
    return run_yamllint()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A plain closing line that CI reads: 'N passed, N failed'."""
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    skipped = len(stats.get("skipped", []))
    terminalreporter.write_line(f"summary: {passed} passed, {failed} failed, {skipped} skipped")
