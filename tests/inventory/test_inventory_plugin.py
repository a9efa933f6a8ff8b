"""The inventory plugin through Ansible's own CLIs, as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_output import plain

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LAB = ROOT / "inventory" / "lab" / "cluster.yml"


def ansible(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [str(BIN / tool), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def plan_copy(tmp_path: Path) -> Path:
    shutil.copy(LAB, tmp_path / "cluster.yml")
    shutil.copy(LAB.with_name("cluster.lock.json"), tmp_path / "cluster.lock.json")
    return tmp_path / "cluster.yml"


def test_graph_needs_no_flags_and_shows_plan_groups() -> None:
    result = ansible("ansible-inventory", "-i", str(LAB.relative_to(ROOT)), "--graph")
    assert result.returncode == 0, result.stderr
    graph = result.stdout
    for group in (
        "slurm_controller",
        "slurm_compute",
        "ceph_osd",
        "rack_r1",
        "rack_r2",
        "access_tor1",
        "pool_gpu",
        "pool_accel",
        "gpu_h100",
        "accel_tpu",
        "nodes_stor",
    ):
        assert f"@{group}:" in graph, group


def test_list_carries_locked_addresses_and_plan_vars() -> None:
    result = ansible("ansible-inventory", "-i", str(LAB), "--list")
    assert result.returncode == 0, result.stderr
    data = plain(json.loads(result.stdout))
    assert isinstance(data, dict)
    hostvars = data["_meta"]["hostvars"]
    lock = json.loads(LAB.with_name("cluster.lock.json").read_text())
    assert set(hostvars) == set(lock["networks"]["mgmt"]["hosts"])
    for host, address in lock["networks"]["mgmt"]["hosts"].items():
        assert hostvars[host]["ansible_host"] == address
        for net, data_net in lock["networks"].items():
            if host not in data_net["hosts"]:  # a host off this network (the lab's osd01)
                assert net not in hostvars[host]["plan_host"]["interfaces"]
                continue
            assert (
                hostvars[host]["plan_host"]["interfaces"][net]["address"] == data_net["hosts"][host]
            )
    assert set(data["rack_r1"]["hosts"]) == {
        h for h, v in hostvars.items() if v["plan_host"]["rack"] == "r1"
    }


def test_constructable_options_from_the_plan(plan_copy: Path) -> None:
    with plan_copy.open("a") as handle:
        handle.write(
            "keyed_groups:\n  - key: plan_host.accelerators.model | default('none')\n"
            "    prefix: model\ncompose:\n  slurm_weight: plan_host.cpu_cores * 10\n"
            "groups:\n  big_memory: plan_host.memory_gb >= 8\n"
        )
    result = ansible("ansible-inventory", "-i", str(plan_copy), "--list")
    assert result.returncode == 0, result.stderr
    data = plain(json.loads(result.stdout))
    assert isinstance(data, dict)
    assert set(data["model_H100_PCIE_80GB"]["hosts"]) == {"gpu01", "gpu02"}
    assert set(data["big_memory"]["hosts"]) == {"gpu01", "gpu02"}
    assert data["_meta"]["hostvars"]["head01"]["slurm_weight"] == 20


def test_stale_lock_fails_with_the_fix_named(plan_copy: Path) -> None:
    text = plan_copy.read_text().replace("  gpu:\n    count: 2", "  gpu:\n    count: 3")
    plan_copy.write_text(text)
    result = ansible("ansible-inventory", "-i", str(plan_copy), "--list")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "lock-stale" in output and "gpu03" in output
    assert "cluster-plan lock" in output
    assert "Traceback" not in output


def test_broken_plan_fails_with_line_and_path(plan_copy: Path) -> None:
    text = plan_copy.read_text().replace("  domain: lab.internal", "  domian: lab.internal")
    plan_copy.write_text(text)
    result = ansible("ansible-inventory", "-i", str(plan_copy), "--list")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "$.cluster.domian" in output and "did you mean 'domain'" in output
    line = next(i for i, text in enumerate(text.splitlines(), 1) if "domian:" in text)
    assert f"{plan_copy}:{line}:3" in output
    assert "Traceback" not in output


def test_ansible_doc_documents_the_plugin() -> None:
    result = ansible("ansible-doc", "-t", "inventory", "cluster_plan")
    assert result.returncode == 0, result.stderr
    assert "plan_host" in result.stdout and "keyed_groups" in result.stdout
