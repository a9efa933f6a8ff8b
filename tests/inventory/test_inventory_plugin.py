"""The inventory plugin through Ansible's own CLIs, as a user runs them from the repository root
(whose ansible.cfg enables it): a sound plan gives the expanded hosts and groups; a bad plan, a
missing or a stale lock fails with the finding in the output and no traceback. Each
`ansible-inventory` run is made once and read by every test that needs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from ansible_output import plain

from cluster_plan.api import load_expanded

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
BAD = ROOT / "tests" / "plans" / "bad"


def ansible(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [str(BIN / tool), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def lab_list() -> dict[str, Any]:
    """`ansible-inventory --list` of the lab plan."""
    result = ansible("ansible-inventory", "-i", str(LAB), "--list")
    assert result.returncode == 0, result.stderr
    data = plain(json.loads(result.stdout))
    assert isinstance(data, dict)
    return data


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
    assert "head01" in graph


def test_list_carries_locked_addresses_and_plan_vars(lab_list: dict[str, Any]) -> None:
    hostvars = lab_list["_meta"]["hostvars"]
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
    assert set(lab_list["rack_r1"]["hosts"]) == {
        h for h, v in hostvars.items() if v["plan_host"]["rack"] == "r1"
    }


def test_lab_inventory_matches_the_expansion(lab_list: dict[str, Any]) -> None:
    expanded = load_expanded(LAB)
    hostvars = lab_list["_meta"]["hostvars"]
    assert set(hostvars) == set(expanded["hosts"])
    for name, host in expanded["hosts"].items():
        assert hostvars[name]["ansible_host"] == host["address"]
        assert hostvars[name]["plan_host"] == host
    for group, members in expanded["groups"].items():
        assert sorted(lab_list[group]["hosts"]) == members, group


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


def _lab_variant(base: Path, name: str, old: str, new: str, lock: bool = True) -> Path:
    """A copy of the lab plan with ``old`` replaced by ``new`` (and its lock, unless not)."""
    folder = base / name
    folder.mkdir()
    text = LAB.read_text()
    assert old in text, old
    (folder / "cluster.yml").write_text(text.replace(old, new))
    if lock:
        shutil.copy(LAB.with_name("cluster.lock.json"), folder / "cluster.lock.json")
    return folder / "cluster.yml"


def _broken_sources(base: Path) -> dict[str, tuple[Path, list[str]]]:
    """name -> (inventory source, what its output must show: the finding code first)."""
    cases = {
        name: (BAD / name, [f"[{code}]"])
        for name, code in (
            ("network-overlap.yml", "network-overlap"),
            ("duplicate-key-nested.yml", "duplicate-key"),
            ("yaml-syntax.yml", "yaml-syntax"),
            ("absurd-count.yml", "range"),
            ("binary-junk.yml", "not-text"),
        )
    }
    missing = _lab_variant(base, "missing", "cluster:", "cluster:", lock=False)
    cases["missing-lock"] = (missing, ["[lock-missing]", "cluster-plan lock"])
    stale = _lab_variant(base, "stale", "  gpu:\n    count: 2", "  gpu:\n    count: 3")
    cases["stale-lock"] = (stale, ["[lock-stale]", "gpu03", "cluster-plan lock"])
    typo = _lab_variant(base, "typo", "  domain: lab.internal", "  domian: lab.internal")
    line = next(i for i, t in enumerate(typo.read_text().splitlines(), 1) if "domian:" in t)
    cases["unknown-key"] = (
        typo,
        ["[unknown-key]", "$.cluster.domian", "did you mean 'domain'", f"{typo}:{line}:3"],
    )
    return cases


def test_bad_sources_fail_with_the_finding_and_no_traceback(tmp_path: Path) -> None:
    cases = _broken_sources(tmp_path)
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = pool.map(
            lambda c: ansible("ansible-inventory", "-i", str(c[0]), "--list"), cases.values()
        )
        results = dict(zip(cases, runs, strict=True))
    for name, (source, shown) in cases.items():
        proc = results[name]
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0, f"{name}: {output}"
        for text in shown:
            assert text in output, f"{name}: no {text!r} in {output}"
        assert "Traceback" not in output, name
        assert str(source) in output, name  # the finding says which file
    assert "cluster-plan lock" in results["stale-lock"].stderr
    assert "cluster-plan lock" in results["missing-lock"].stderr


def test_ansible_doc_documents_the_plugin() -> None:
    result = ansible("ansible-doc", "-t", "inventory", "cluster_plan")
    assert result.returncode == 0, result.stderr
    assert "plan_host" in result.stdout and "keyed_groups" in result.stdout
