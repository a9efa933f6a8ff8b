"""The collection cluster_plan.cluster made importable for the tests, as ansible.cfg finds it:
through collections/, which links this repository in. Imported, never called: ansible-core
allows one loader per process and warns at a second (an error under the suite's warnings)."""

from __future__ import annotations

from pathlib import Path

from ansible.plugins.loader import init_plugin_loader

ROOT = Path(__file__).resolve().parents[1]
init_plugin_loader([str(ROOT / "collections")])
