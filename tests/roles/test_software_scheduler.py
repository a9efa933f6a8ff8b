"""The software role on a Kubernetes plan installs and writes nothing on the hosts (the pods run
the training image, which the section describes) and says so once; on a Slurm plan the same
host gets its build. The role runs on this host in check mode (support/playbooks.local_play),
its program and modulefiles pointed into a temporary folder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.playbooks import local_play

# `python3` is installed on every machine that runs Ansible here: a Slurm plan's check run
# finds it with dpkg and needs no apt cache.
BUILD = {
    "version": "3.11",
    "source": "debian",
    "build": "cpu",
    "packages": ["python3"],
    "prefix": None,
    "index_url": None,
    "module": None,
}
SAID = "The plan's scheduler is Kubernetes: its software section says what the training image"
# the role's tasks that install or write on a host of a plan that gives it software
INSTALLS = (
    "Read which of the builds' packages are installed",
    "Build the collectives program's zip on the controller",
    "Create the directory of the collectives program",
    "Install the collectives program",
    "Find Open MPI's parameter file",
)
TASK = re.compile(r"^TASK \[software : (.+?)\] \**$")
STATUS = re.compile(r"^(ok|changed|skipping|failed|fatal): \[localhost\]")
VIEW = re.compile(r'"msg": "VIEW (.*)"$', re.M)


def statuses(output: str) -> dict[str, str]:
    """Each task of the role, by name: the status of its (first) result."""
    found: dict[str, str] = {}
    task = None
    for line in output.splitlines():
        if match := TASK.match(line):
            task = match.group(1)
        elif task and (status := STATUS.match(line)):
            found.setdefault(task, status.group(1))
    return found


def run_role(tmp_path: Path, scheduler: str | None) -> tuple[str, dict[str, Any]]:
    """The role in check mode for a host whose plan gives it BUILD; the output and the role's
    view of the host (its variables, read after the role)."""
    plays = [
        {
            "name": "Software environments",
            "hosts": "localhost",
            "gather_facts": True,
            "vars": {
                "plan_host": {
                    "software": {"pytorch": BUILD},
                    "interfaces": {"compute": {"device": "lo", "cidr": "10.0.0.0/24"}},
                },
                "cluster_plan": {
                    "scheduler": {"type": scheduler} if scheduler else None,
                    "acceptance": {"network": {"networks": ["compute"]}},
                },
                "software_modulefiles_dir": str(tmp_path / "modulefiles"),
                "software_program_file": str(tmp_path / "lib" / "program.pyz"),
                "software_bundle_dir": str(tmp_path / "bundle"),
            },
            "tasks": [
                {
                    "name": "Run the role",
                    "ansible.builtin.include_role": {"name": "software", "public": True},
                },
                {
                    "name": "Show the role's view",
                    "ansible.builtin.debug": {
                        "msg": "VIEW {{ {'environments': software_environments, "
                        "'packages': software_debian_packages, 'pip': software_pip_installs, "
                        "'modules': software_modules} | to_json }}"
                    },
                },
            ],
        }
    ]
    play_file = tmp_path / "play.json"
    play_file.write_text(json.dumps(plays))
    done = local_play(play_file, {}, check=True)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    (view,) = VIEW.findall(out)
    return out, json.loads(json.loads(f'"{view}"'))


def test_a_kubernetes_plan_s_host_gets_nothing_and_is_told_once(tmp_path: Path) -> None:
    out, view = run_role(tmp_path, "kubernetes")
    assert out.count(SAID) == 1, out
    assert view == {"environments": {}, "packages": [], "pip": [], "modules": []}
    done = statuses(out)
    assert {task: done.get(task) for task in INSTALLS} == dict.fromkeys(INSTALLS, "skipping")
    assert not (tmp_path / "bundle").exists()  # not even the controller builds the program


@pytest.mark.parametrize("scheduler", ["slurm", None])
def test_a_plan_s_own_hosts_get_the_build(tmp_path: Path, scheduler: str | None) -> None:
    out, view = run_role(tmp_path, scheduler)
    assert SAID not in out
    assert view["environments"] == {"pytorch": BUILD}
    assert view["packages"] == ["python3"]
    done = statuses(out)
    assert done["Install the collectives program"] == "changed", out
    assert all(done[task] != "skipping" for task in INSTALLS), done
