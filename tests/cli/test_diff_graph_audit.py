"""`cluster-plan diff`, `graph` and `audit` on the lab plan and edited copies of it."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.cli_output import result

from cluster_plan.cli import main

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"


def copy_plan(directory: Path, name: str, edit: tuple[str, str] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    plan = directory / f"{name}.yml"
    text = LAB.read_text()
    if edit:
        assert edit[0] in text
        text = text.replace(*edit)
    plan.write_text(text)
    shutil.copy(LAB.with_name("cluster.lock.json"), directory / f"{name}.lock.json")
    return plan


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, object]:
    code = main([*args, "--format", "json"])
    return code, result(capsys.readouterr().out)


def test_identical_plans_have_no_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, changes = run_json(capsys, "diff", str(LAB), str(copy_plan(tmp_path, "same")))
    assert (code, changes) == (0, [])


def test_reordering_node_groups_is_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = LAB.read_text()
    head = text[text.index("  head:\n") : text.index("  gpu:\n")]
    new = copy_plan(tmp_path, "reordered", (head, ""))
    new.write_text(new.read_text().replace("  stor:\n", head + "  stor:\n", 1))
    code, changes = run_json(capsys, "diff", str(LAB), str(new))
    assert (code, changes) == (0, [])


def test_added_node_reconfigures_and_keeps_addresses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = copy_plan(tmp_path, "grown", ("  gpu:\n    count: 2", "  gpu:\n    count: 3"))
    code, changes = run_json(capsys, "diff", str(LAB), str(new))
    assert code == 0
    assert isinstance(changes, list)
    hosts = [c for c in changes if c["host"]]
    assert [(c["kind"], c["host"], c["impact"]) for c in hosts] == [
        ("added", "gpu03", "reconfigure")
    ]
    assert not any(c["destructive"] for c in changes)


def test_renumbering_is_destructive_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = copy_plan(tmp_path, "moved", ("cidr: 10.41.0.0/24", "cidr: 10.43.0.0/24"))
    code, changes = run_json(capsys, "diff", str(LAB), str(new))
    assert code == 3  # refused: destructive, not confirmed (1 is for a plan that fails a check)
    assert isinstance(changes, list)
    renumbered = {c["host"] for c in changes if c["impact"] == "renumber"}
    assert renumbered == {
        "head01",
        "gpu01",
        "gpu02",
        "infer01",
        "cpu01",
        "stor01",
        "stor02",
        "stor03",
    }
    assert main(["diff", str(LAB), str(new), "--allow-destructive"]) == 0


def test_mtu_change_drains_and_restarts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = copy_plan(
        tmp_path, "mtu", ("mtu: 9000\n    description: job", "mtu: 8000\n    description: job")
    )
    code, changes = run_json(capsys, "diff", str(LAB), str(new))
    assert code == 0
    assert isinstance(changes, list)
    impacts = {c["path"]: c["impact"] for c in changes}
    assert impacts["$.networks.compute.mtu"] == "drain and restart"
    assert impacts["$.hosts.gpu01.interfaces.compute.mtu"] == "drain and restart"


def test_graph_is_svg_with_every_switch_and_host(tmp_path: Path) -> None:
    out = tmp_path / "lab.svg"
    assert main(["graph", str(LAB), "-o", str(out)]) == 0
    root = ET.fromstring(out.read_text())
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for name in (
        "core1",
        "agg1",
        "tor1",
        "tor2",
        "rack r1",
        "rack r2",
        "head01",
        "stor03",
        "10G/host",
        "40G",
    ):
        assert name in texts, name


def test_audit_adds_up_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_json(capsys, "audit", str(LAB))
    assert code == 0
    assert isinstance(report, dict)
    assert report["hosts"] == 9
    assert report["accelerators"] == {"H100-PCIE-80GB": 4, "tpu": 4}
    assert report["networks"]["mgmt"]["hosts"] == 9
    assert report["networks"]["compute"]["hosts"] == 8  # osd01 is off the compute network
    # tor1 serves rack r1: head01, gpu01, stor01, stor03 at 10 Gb/s on 40 Gb/s of uplink
    assert report["access_switches"]["tor1"]["oversubscription"] == 1.0
    assert report["problems"] == []
