"""Reading what Ansible's CLIs print, shared by the tests that run them."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> Any:
    """ansible-core 2.19 marks plugin-set strings untrusted: {"__ansible_unsafe": "x"} in JSON."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
