"""The task timing callback (cluster_plan.cluster.task_times) that the converge benchmarks
enable: a run ends with its slowest tasks, and their seconds go to a JSON file. Runs Ansible
on this machine only, with a local connection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.playbooks import ansible_env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "plugins" / "callback"))
from task_times import slowest  # noqa: E402

PLAYBOOK = """
- name: Two tasks of different length
  hosts: all
  gather_facts: false
  tasks:
    - name: Slow
      ansible.builtin.command: sleep 1.5
      changed_when: false
    - name: Quick
      ansible.builtin.command: "true"
      changed_when: false
"""


def _run(tmp_path: Path, enabled: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    a: {ansible_connection: local}\n    b: {ansible_connection: local}\n"
    )
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "inventory.yml", "play.yml"],
        cwd=tmp_path,
        env={
            **ansible_env(),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
            "ANSIBLE_CALLBACKS_ENABLED": enabled,
            "CLUSTER_PLAN_TASK_TIMES": str(tmp_path / "times.json"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_slowest_task_is_listed_first_and_written_as_json(tmp_path: Path) -> None:
    run = _run(tmp_path, "cluster_plan.cluster.task_times")
    assert run.returncode == 0, run.stdout + run.stderr
    tail = run.stdout[run.stdout.index("SLOWEST TASKS") :].splitlines()
    assert tail[1].endswith("  Slow") and tail[2].endswith("  Quick"), tail
    times = json.loads((tmp_path / "times.json").read_text())
    assert set(times) == {"Slow", "Quick"}
    # the sleep is a lower bound of what the callback must record; no upper wall-clock bound
    # (a loaded machine stretches both tasks), only their order
    assert times["Slow"] >= 1.5 and times["Slow"] > times["Quick"]


def test_off_unless_enabled(tmp_path: Path) -> None:
    run = _run(tmp_path, "cluster_plan.cluster.problem_summary")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SLOWEST TASKS" not in run.stdout
    assert not (tmp_path / "times.json").exists()


def test_slowest_ranks_and_shares() -> None:
    lines = slowest({"a": 1.0, "b": 3.0, "c": 0.0}, top=2)
    assert lines == ["     3.0 s  75.0 %  b", "     1.0 s  25.0 %  a"]
