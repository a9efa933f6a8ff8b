"""The strategy ansible.cfg names (plugins/strategy/mitogen_linear.py) loads the collection's
filter and lookup modules in the controller before the first task, so that the workers Ansible
forks find them loaded (docs/scale.md). Run in a fresh interpreter: in this one, earlier tests
may have loaded them already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
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


PLAY = """- name: One task on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Say something
      ansible.builtin.debug:
        msg: strategy under test
"""


def run_play(tmp_path: Path, extra_env: dict[str, str] | None = None) -> str:
    """A one-task play under the repository's ansible.cfg (strategy mitogen_linear)."""
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        **(extra_env or {}),
    }
    env.pop("ANSIBLE_STRATEGY", None)
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "strategy under test" in output
    return output


def test_a_run_prints_no_deprecation_warning(tmp_path: Path) -> None:
    output = run_play(tmp_path)
    assert "deprecat" not in output.lower(), output
    assert "Mitogen is not usable" not in output


def test_without_mitogen_the_run_goes_on_under_ansibles_linear_strategy(tmp_path: Path) -> None:
    # a package of the same name first on the path, which fails to import as a missing or
    # refused Mitogen would
    shadow = tmp_path / "shadow" / "ansible_mitogen"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no Mitogen in this test')\n")
    output = run_play(tmp_path, {"PYTHONPATH": str(shadow.parent)})
    assert (
        "Mitogen is not usable here (ImportError: no Mitogen in this test); this run uses "
        "Ansible's own linear strategy" in " ".join(output.split())
    ), output


OTHER_DEPRECATION = """
import importlib.util, sys
sys.path.insert(0, sys.argv[1] + "/tests")
import collection_loader  # noqa: F401
spec = importlib.util.spec_from_file_location(
    "strategy_under_test", sys.argv[1] + "/plugins/strategy/mitogen_linear.py")
spec.loader.exec_module(importlib.util.module_from_spec(spec))
from ansible.utils.display import Display
display = Display()
display.deprecated(msg=sys.argv[2] + " and do not carry any guarantees.")
display.deprecated(msg="Another feature is deprecated.", version="9.99")
"""


def test_only_the_third_party_strategy_notice_is_dropped() -> None:
    module = (ROOT / "plugins" / "strategy" / "mitogen_linear.py").read_text()
    notice = module.split('THIRD_PARTY_STRATEGY = "')[1].split('"')[0]
    done = subprocess.run(
        [sys.executable, "-c", OTHER_DEPRECATION, str(ROOT), notice],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[DEPRECATION WARNING]: Another feature is deprecated." in done.stderr
    assert notice not in done.stderr
