"""The monitoring role's delivery of the controller's state documents (roles/monitoring/tasks/
deliver_state.yml), run by Ansible on this machine with a local connection: the "controller's"
reports and the "collector host's" state folder are temporary folders.

The acceptance history's path comes from the plan (acceptance.history.database), and whatever
it names is copied to the state collector's host. Only a regular file outside the system
folders is copied, and the history only when the plan's value keeps to the schema's
history_file grammar; anything else fails the play with the assert's message before a copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.playbooks import ansible_env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK = """
- name: The state documents of one controller
  hosts: all
  gather_facts: false
  tasks:
    - name: Deliver them
      ansible.builtin.include_role:
        name: monitoring
        tasks_from: deliver_state
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role copies as root")


def deliver(tmp_path: Path, database: str | None) -> tuple[subprocess.CompletedProcess[str], Path]:
    reports, state = tmp_path / "reports", tmp_path / "state"
    reports.mkdir(exist_ok=True)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    plan: dict[str, Any] = {
        "cluster": {"name": "lab"},
        "monitoring": {},
        "acceptance": {"history": {"database": database}},
    }
    extra = {
        "cluster_plan": plan,
        "monitoring_controller": "head01",
        "monitoring_reports_dir": str(reports),
        "monitoring_state_dir": str(state),
        "ansible_python_interpreter": sys.executable,
    }
    env = {**ansible_env(), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    run = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "head01,", "-c", "local",
         "-e", json.dumps(extra), str(tmp_path / "play.yml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return run, state


def test_the_history_and_the_reports_documents_are_copied(tmp_path):
    history = tmp_path / "keep" / "history.sqlite"
    history.parent.mkdir()
    history.write_bytes(b"SQLite format 3\x00")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "drift.json").write_text("{}")
    run, state = deliver(tmp_path, str(history))
    assert run.returncode == 0, run.stdout[-3000:]
    assert (state / "history.sqlite").read_bytes() == b"SQLite format 3\x00"
    assert (state / "drift.json").read_text() == "{}"


@pytest.mark.parametrize(
    ("database", "why"),
    [
        ("/dev/zero", "/dev/zero (/dev/zero)"),  # a device: never a regular file
        ("/etc/passwd", "'/etc/passwd' is not a SQLite file's path"),  # a system file
    ],
)
def test_what_the_plan_may_not_name_is_refused_before_a_copy(tmp_path, database, why):
    run, state = deliver(tmp_path, database)
    assert run.returncode != 0
    assert "refusing to copy" in run.stdout and why in run.stdout, run.stdout[-3000:]
    assert not (state / "history.sqlite").exists()


def test_a_link_to_another_file_under_the_history_name_is_refused(tmp_path):
    secret = tmp_path / "keys" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("a private key\n")
    link = tmp_path / "history.sqlite"
    link.symlink_to(secret)
    run, state = deliver(tmp_path, str(link))
    assert run.returncode != 0
    assert f"refusing to copy {link} ({secret})" in run.stdout, run.stdout[-3000:]
    assert not (state / "history.sqlite").exists()


def test_a_fifo_is_refused_without_reading_it(tmp_path):
    fifo = tmp_path / "history.sqlite"
    os.mkfifo(fifo)
    run, state = deliver(tmp_path, str(fifo))
    assert run.returncode != 0
    assert "refusing to copy" in run.stdout, run.stdout[-3000:]
    assert not (state / "history.sqlite").exists()
