"""Prometheus' and Alertmanager's own checkers for the monitoring tests."""

from __future__ import annotations

import os

import pytest


def need(tool: str | None, package: str) -> str:
    """The tool's path; CI must have it (Makefile APT_PACKAGES), elsewhere the test skips."""
    if tool is None:
        message = f"{package} is not installed (apt-get install {package})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return tool
