"""The Ansible collection cluster_plan.cluster: built from this repository, installed next to
the Python package, and used from a directory outside the repository (no ansible.cfg, no
inventory_plugins path): the plan is an inventory, the roles run with their own modules and
filter plugins, the site playbook is there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from ansible_output import plain

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
EXAMPLE = ROOT / "inventory" / "examples" / "slurm-h100.yml"
GOLDEN_LAB = ROOT / "tests" / "plans" / "golden" / "lab.expanded.json"


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The collection built and installed; an environment that knows only the install."""
    work = tmp_path_factory.mktemp("collection")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(PATH=f"{BIN}:{env.get('PATH', '')}", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(work / "collections"),
               ANSIBLE_LOCALHOST_WARNING="false", HOME=str(work))  # fmt: skip
    built = run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path",
                 str(work / "dist"), str(ROOT)], work, env)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (archive,) = (work / "dist").glob("cluster_plan-cluster-*.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    # what a collection user needs, and none of the repository's own machinery
    assert "plugins/inventory/cluster_plan.py" in names
    assert "plugins/modules/nvml_facts.py" in names
    assert "plugins/modules/slurm_reservation.py" in names
    assert "plugins/modules/role_manifest.py" in names
    # the backup program is package code (cluster_plan.backup), built into a zip by the role;
    # the role ships the command that runs it
    assert "roles/backup/templates/cluster-plan-backup.sh.j2" in names
    assert not [n for n in names if n.startswith("roles/backup/files/")]
    assert "playbooks/restore.yml" in names
    assert "plugins/filter/slurm_policy.py" in names
    assert "playbooks/site.yml" in names
    assert not [n for n in names if n.startswith((".venv", "tests/", "cluster_plan/", ".git"))]
    done = run([str(BIN / "ansible-galaxy"), "collection", "install", "-p",
                str(work / "collections"), str(archive)], work, env)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    outside = work / "site"
    outside.mkdir()
    return outside, env


def test_a_plan_outside_the_repository_is_an_inventory(installed):
    outside, env = installed
    plan = outside / "cluster.yml"
    plan.write_text(
        EXAMPLE.read_text().replace(
            "\nplugin: cluster_plan\n", "\nplugin: cluster_plan.cluster.cluster_plan\n"
        )
    )
    shutil.copy(EXAMPLE.with_name("slurm-h100.lock.json"), outside / "cluster.lock.json")
    listed = run([str(BIN / "ansible-inventory"), "-i", str(plan), "--list"], outside, env)
    assert listed.returncode == 0, listed.stderr
    inventory = plain(json.loads(listed.stdout))
    hosts = inventory["_meta"]["hostvars"]
    assert sorted(hosts) == ["gpu01", "gpu02", "gpu03", "gpu04", "head01"]
    assert inventory["slurm_controller"]["hosts"] == ["head01"]
    # plan_host is read through the collection's lookup when a play templates it
    debug = ["-m", "ansible.builtin.debug", "-a", "msg={{ plan_host.address }}"]
    shown = run([str(BIN / "ansible"), "-i", str(plan), "gpu01", "-c", "local", *debug],
                outside, env)  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f'"msg": "{hosts["gpu01"]["ansible_host"]}"' in shown.stdout
    # the plan's access section decides how Ansible logs in
    assert (hosts["gpu01"]["ansible_user"], hosts["gpu01"]["ansible_port"]) == ("ops", 22)
    # the plan is validated there too: a broken plan fails, with its findings. Ansible only
    # warns about an inventory source that fails unless told otherwise (the README says how)
    plan.write_text(plan.read_text().replace("cidr: 172.20.0.0/24", "cidr: 300.20.0.0/24"))
    strict = {**env, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}
    broken = run([str(BIN / "ansible-inventory"), "-i", str(plan), "--list"], outside, strict)
    assert broken.returncode != 0
    assert "network-address" in broken.stderr


def test_a_role_of_the_collection_runs_with_its_own_module_and_filters(installed):
    outside, env = installed
    expanded = json.loads(GOLDEN_LAB.read_text())
    variables = {
        "plan_host": expanded["hosts"]["gpu01"],
        "cluster_plan": {k: v for k, v in expanded.items() if k not in ("hosts", "groups")},
        "gpu_health_report_dir": str(outside / "reports"),
    }
    (outside / "vars.json").write_text(json.dumps(variables))
    (outside / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n"
        "    - cluster_plan.cluster.gpu_health\n"
    )
    played = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                  "-e", "@vars.json", "-e", f"ansible_python_interpreter={sys.executable}",
                  "play.yml"], outside, env)  # fmt: skip
    out = played.stdout + played.stderr
    assert played.returncode == 0, out
    # nvml_facts (the collection's module) answered, gpu_health_judge (the role's filter) judged
    assert "GPU health skipped" in out
    report = json.loads((outside / "reports" / "localhost.json").read_text())
    assert report["verdict"] == "skipped"


def test_the_site_playbook_is_in_the_collection(installed):
    outside, env = installed
    listed = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "--list-tasks",
                  "cluster_plan.cluster.site"], outside, env)  # fmt: skip
    assert listed.returncode == 0, listed.stdout + listed.stderr
    plays = (
        "Host baseline from the cluster plan",
        "NVIDIA drivers",
        "Backups with a restore drill",
        "Network acceptance",
    )
    for play in plays:
        assert play in listed.stdout
