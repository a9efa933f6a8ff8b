"""The strategy ansible.cfg names (plugins/strategy/mitogen_linear.py) loads the collection's
filter and lookup modules in the controller before the first task, so that the workers Ansible
forks find them loaded (docs/scale.md). Run in a fresh interpreter: in this one, earlier tests
may have loaded them already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1] + "/tests")
import collection_loader  # noqa: F401 (the collection importable, as ansible.cfg finds it)
spec = importlib.util.spec_from_file_location(
    "strategy_under_test", sys.argv[1] + "/plugins/strategy/mitogen_linear.py")
strategy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(strategy)
prefix = "ansible_collections.cluster_plan.cluster.plugins."
def loaded():
    names = [m for m in sys.modules if m.startswith(prefix) and m.count(".") == 5]
    return sorted(m[len(prefix):] for m in names)
before = loaded()
strategy.load_collection_jinja_plugins()
print(json.dumps({"before": before, "after": loaded(),
                  "is_mitogen": [c.__module__ for c in strategy.StrategyModule.__mro__][1]}))
"""


def test_every_filter_and_lookup_module_is_loaded_before_the_first_task() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    on_disk = sorted(
        f"{kind}.{path.stem}"
        for kind in ("filter", "lookup")
        for path in (ROOT / "plugins" / kind).glob("*.py")
        if path.stem != "__init__"
    )
    assert found["before"] == []
    assert found["after"] == on_disk
    assert found["is_mitogen"].startswith("ansible_mitogen."), found
