"""The run summary callback (cluster_plan.cluster.problem_summary): a run that loses a host or
fails on one ends with a short line naming it, after the unchanged PLAY RECAP. Runs Ansible
on this machine only: a local connection, and an ssh stand-in that fails the way ssh fails
when a node is gone (no packet is sent)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.playbooks import RECAP, ansible_env, recap

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "plugins" / "callback"))
from problem_summary import _one_line, summary  # noqa: E402

LOST_SSH = """#!/bin/sh
echo "ssh: connect to host lost01 port 22: No route to host" >&2
exit 255
"""
PLAYBOOK = """
- name: Three hosts
  hosts: all
  gather_facts: false
  tasks:
    - name: Reach every host
      ansible.builtin.command: "true"
      changed_when: false
    - name: Break one host
      ansible.builtin.fail:
        msg: broken on purpose
      when: inventory_hostname == 'bad01'
    - name: A failure the play ignores
      ansible.builtin.fail:
        msg: ignored
      ignore_errors: true
      when: inventory_hostname == 'good01'
    - name: Carry on where the host is still in the play
      ansible.builtin.command: "true"
      changed_when: false
"""


def _run(tmp_path: Path, hosts: dict[str, str]) -> subprocess.CompletedProcess[str]:
    ssh = tmp_path / "ssh"
    ssh.write_text(LOST_SSH)
    ssh.chmod(0o755)
    lines = ["all:", "  hosts:"]
    for host, connection in hosts.items():
        extra = f", ansible_ssh_executable: {ssh}" if connection == "ssh" else ""
        lines.append(f"    {host}: {{ansible_connection: {connection}{extra}}}")
    (tmp_path / "inventory.yml").write_text("\n".join(lines) + "\n")
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"), "play.yml"],
        cwd=tmp_path,
        # the repository's ansible.cfg, which enables the callback
        env={
            **ansible_env(),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_lost_and_a_failed_host_are_named_after_an_unchanged_recap(tmp_path: Path) -> None:
    run = _run(tmp_path, {"good01": "local", "bad01": "local", "lost01": "ssh"})
    assert run.returncode == 4, run.stdout + run.stderr  # ansible-playbook: a host unreachable
    out = run.stdout
    rows = recap(out)
    assert rows["good01"] == {"ok": 3, "changed": 0, "unreachable": 0, "failed": 0}
    assert rows["bad01"]["failed"] == 1 and rows["lost01"]["unreachable"] == 1
    tail = out[out.index("PLAY RECAP") :].splitlines()
    assert len(RECAP.findall(out)) == 3  # the recap is the default callback's, unchanged
    assert tail[-3:] == [
        "RUN SUMMARY",
        "unreachable: lost01 (ssh: connect to host lost01 port 22: No route to host)",
        "failed: bad01 (Break one host)",
    ]
    # the lost host is reported once per run, not at every later task
    assert out.count("fatal: [lost01]") == 1


def test_a_clean_run_prints_no_summary(tmp_path: Path) -> None:
    run = _run(tmp_path, {"good01": "local"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "RUN SUMMARY" not in run.stdout
    assert run.stdout.rstrip().splitlines()[-1].startswith("good01 ")


@pytest.mark.parametrize(
    ("stats", "lines"),
    [
        ({"a": {"failures": 0, "unreachable": 0}}, []),
        # a rescued failure leaves no failure in the stats: nothing to report
        ({"a": {"failures": 0, "unreachable": 0, "rescued": 1}}, []),
        (
            {"b": {"failures": 1}, "a": {"unreachable": 1, "failures": 1}},
            ["RUN SUMMARY", "unreachable: a (gone)", "failed: b (Install)"],
        ),
    ],
)
def test_summary_names_hosts_from_the_final_stats(
    stats: dict[str, dict[str, int]], lines: list[str]
) -> None:
    assert summary({"a": "gone"}, {"a": "Earlier", "b": "Install"}, stats) == lines


@pytest.mark.parametrize(
    "message",
    [
        # Ansible's ssh connection
        "Failed to connect to the host via ssh: ssh: connect to host lost01 port 22: "
        "No route to host",
        # Mitogen's (the mitogen_linear strategy ansible.cfg runs)
        "Task failed: EOF on stream; last 100 lines received:\n"
        "ssh: connect to host lost01 port 22: No route to host\r",
    ],
)
def test_the_reason_is_ssh_s_own_words_under_either_connection(message: str) -> None:
    assert _one_line(message) == "ssh: connect to host lost01 port 22: No route to host"


def test_a_host_lost_during_a_task_under_mitogen_is_named_with_the_cause() -> None:
    message = (
        "Task failed: Mitogen was disconnected from the remote environment while a call was "
        "in-progress. If you feel this is in error, please file a bug. Original error was: "
        "the respondent Context has disconnected"
    )
    assert _one_line(message) == "lost during a task: the respondent Context has disconnected"
