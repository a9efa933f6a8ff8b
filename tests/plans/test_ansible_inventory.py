"""The inventory plugin through `ansible-inventory`, as Ansible users meet it: a sound plan
gives the expanded hosts and groups; a bad plan, a missing or a stale lock fails with the
finding in the output and no traceback. Runs from the repository root, whose ansible.cfg
enables the plugin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ansible_output import plain

from cluster_plan.api import load_expanded

ROOT = Path(__file__).resolve().parents[2]
BAD = Path(__file__).resolve().parent / "bad"
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
EXE = ROOT / ".venv" / "bin" / "ansible-inventory"
if not EXE.exists():
    found = shutil.which("ansible-inventory")
    if found is None:
        pytest.skip("ansible-inventory is not installed", allow_module_level=True)
    EXE = Path(found)


def ansible_inventory(source: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANSIBLE_FORCE_COLOR": "0",
        "NO_COLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
    }
    env.pop("ANSIBLE_CONFIG", None)
    return subprocess.run(
        [str(EXE), "-i", str(source), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="module")
def lab_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("lab")
    shutil.copy(LAB, base / "cluster.yml")
    shutil.copy(LAB.with_name("cluster.lock.json"), base / "cluster.lock.json")
    return base


def _broken_copies(base: Path) -> dict[str, tuple[Path, str]]:
    """name -> (inventory source, the finding code its output must show)."""
    cases: dict[str, tuple[Path, str]] = {}
    for name, code in (
        ("network-overlap.yml", "network-overlap"),
        ("duplicate-key-nested.yml", "duplicate-key"),
        ("yaml-syntax.yml", "yaml-syntax"),
        ("absurd-count.yml", "range"),
        ("binary-junk.yml", "not-text"),
    ):
        cases[name] = (BAD / name, code)
    missing = base / "missing"
    missing.mkdir()
    shutil.copy(LAB, missing / "cluster.yml")
    cases["missing-lock"] = (missing / "cluster.yml", "lock-missing")
    stale = base / "stale"
    stale.mkdir()
    shutil.copy(LAB.with_name("cluster.lock.json"), stale / "cluster.lock.json")
    text = LAB.read_text().replace(
        '    count: 1\n    hostname: "cpu{n:02d}"', '    count: 2\n    hostname: "cpu{n:02d}"'
    )
    (stale / "cluster.yml").write_text(text)
    cases["stale-lock"] = (stale / "cluster.yml", "lock-stale")
    return cases


def test_bad_sources_fail_with_the_finding_and_no_traceback(tmp_path):
    cases = _broken_copies(tmp_path)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(
            zip(
                cases,
                pool.map(lambda c: ansible_inventory(c[0], tmp_path, "--list"), cases.values()),
                strict=True,
            )
        )
    for name, (source, code) in cases.items():
        proc = results[name]
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0, f"{name}: {output}"
        assert f"[{code}]" in output, f"{name}: {output}"
        assert "Traceback" not in output, name
        assert str(source) in output, name  # the finding says which file
    assert "cluster-plan lock" in results["stale-lock"].stderr
    assert "cluster-plan lock" in results["missing-lock"].stderr


def test_lab_inventory_matches_the_expansion(lab_copy):
    proc = ansible_inventory(lab_copy / "cluster.yml", lab_copy, "--list")
    assert proc.returncode == 0, proc.stderr
    inventory = plain(json.loads(proc.stdout))
    expanded = load_expanded(lab_copy / "cluster.yml")
    hostvars = inventory["_meta"]["hostvars"]
    assert set(hostvars) == set(expanded["hosts"])
    for name, host in expanded["hosts"].items():
        assert hostvars[name]["ansible_host"] == host["address"]
        assert hostvars[name]["plan_host"] == host
    for group, members in expanded["groups"].items():
        assert sorted(inventory[group]["hosts"]) == members, group
    graph = ansible_inventory(lab_copy / "cluster.yml", lab_copy, "--graph")
    assert graph.returncode == 0
    assert "@slurm_controller:" in graph.stdout
    assert "head01" in graph.stdout
