"""Addresses and racks never move, through the CLI, the way an operator edits a plan.

A 512-node H100 plan on 16 racks (one group dealt over the racks) is written by the test,
locked, then edited: shrunk and grown back, given a 17th rack, its gateway moved onto a
host, and diffed with NEW's own (renumbered) lock.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from support.cli_output import result

from cluster_plan import cli

RACKS = [f"r{i:02d}" for i in range(1, 18)]


def plan_text(count: int = 512, racks: int = 16, gateway: str = "10.0.0.1",
              profile: str = "hgx") -> str:  # fmt: skip
    rack_list = ", ".join(RACKS[:racks])
    access = "\n".join(
        f"    tor{i:02d}: {{uplink: agg1, rack: {rack}, link_gbps: 400}}"
        for i, rack in enumerate(RACKS, 1)
    )
    return f"""plugin: cluster_plan
cluster: {{name: h100, domain: h100.example.com, os: ubuntu-22.04}}
networks:
  mgmt: {{cidr: 10.0.0.0/22, gateway: {gateway}, reserved: 9}}
  compute: {{cidr: 10.16.0.0/22, mtu: 9000}}
racks: {{{", ".join(f"{r}: {{row: A}}" for r in RACKS)}}}
topology:
  core: [core1]
  aggregation: {{agg1: {{uplinks: [core1]}}}}
  access:
{access}
hardware:
  cpu: {{cpu_cores: 32, memory_gb: 256}}
  {profile}: {{cpu_cores: 112, memory_gb: 2048, accelerators: {{model: H100-SXM5-80GB, count: 8}}}}
node_groups:
  head: {{count: 1, hostname: "head{{n:02d}}", hardware: cpu, rack: r01, roles: [slurm_controller]}}
  gpu:
    count: {count}
    hostname: "gpu{{n:03d}}"
    hardware: {profile}
    racks: [{rack_list}]
    roles: [slurm_compute]
    pool: gpu
scheduler:
  type: slurm
  workload_classes:
    training: {{pool: gpu, needs: gpu, default: true}}
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "cluster.yml"
    path.write_text(plan_text())
    assert run(capsys, "lock", str(path))[0] == 0
    return path


def lock_of(plan: Path) -> dict:
    return json.loads(plan.with_name("cluster.lock.json").read_text())


def test_shrink_then_grow_back_returns_every_address_and_rack(plan, capsys):
    before = lock_of(plan)
    plan.write_text(plan_text(count=500))
    assert run(capsys, "lock", str(plan))[0] == 0
    shrunk = lock_of(plan)
    assert shrunk["networks"]["mgmt"]["released"][before["networks"]["mgmt"]["hosts"]["gpu512"]]
    plan.write_text(plan_text(count=512))
    assert run(capsys, "lock", str(plan))[0] == 0
    after = lock_of(plan)
    assert after["networks"] == before["networks"]
    assert after["racks"]["hosts"] == before["racks"]["hosts"]


def test_a_new_rack_takes_the_new_nodes_and_moves_no_server(plan, capsys):
    before = lock_of(plan)["racks"]["hosts"]
    plan.write_text(plan_text(count=544, racks=17))
    code, out, _ = run(capsys, "lock", str(plan))
    assert code == 0
    assert "moved" not in out
    after = lock_of(plan)["racks"]["hosts"]
    assert {h: r for h, r in after.items() if h in before} == before
    new = {h: r for h, r in after.items() if h not in before}
    assert len(new) == 32 and set(new.values()) == {"r17"}


def test_diff_says_a_rack_change_is_destructive_and_names_the_hosts(plan, capsys, tmp_path):
    new = tmp_path / "new" / "cluster.yml"
    new.parent.mkdir()
    # the old way of dealing round-robin over 17 racks: what the lock now prevents, but what
    # a hand-written per-node rack override still can do to a host
    new.write_text(
        plan_text().replace(
            "    pool: gpu\n", "    pool: gpu\n    nodes:\n      gpu001: {rack: r09}\n"
        )
    )
    code, out, err = run(capsys, "diff", str(plan), str(new))
    assert code == 3, err
    assert "relocate (" in out
    assert "changed $.hosts.gpu001.rack: 'r01' -> 'r09' [destructive]" in out
    assert "destructive change" in err
    assert run(capsys, "diff", "--allow-destructive", str(plan), str(new))[0] == 0


def test_diff_of_added_hosts_names_them(plan, capsys, tmp_path):
    new = tmp_path / "new" / "cluster.yml"
    new.parent.mkdir()
    new.write_text(plan_text(count=544, racks=17))
    code, out, _ = run(capsys, "diff", str(plan), str(new))
    assert code == 0
    assert "  added 32 hosts (gpu513 .. gpu544)" in out
    assert " on 32 hosts (" not in out  # the old line with a blank field


def test_diff_compares_new_with_its_own_lock(plan, capsys, tmp_path):
    """NEW's lock renumbers every host (as a deleted and re-made lock would): diff shows it."""
    new = tmp_path / "new" / "cluster.yml"
    new.parent.mkdir()
    new.write_text(plan.read_text() + "# the same plan, locked anew\n")
    renumbered = lock_of(plan)
    for net in renumbered["networks"].values():
        hosts = sorted(net["hosts"])
        net["hosts"] = dict(zip(hosts, reversed([net["hosts"][h] for h in hosts]), strict=True))
    new.with_name("cluster.lock.json").write_text(json.dumps(renumbered))
    code, out, _ = run(capsys, "diff", "--format", "json", str(plan), str(new))
    changes = result(out)
    assert code == 3
    moved = {c["host"] for c in changes if c["impact"] == "renumber"}
    assert len(moved) == 512  # every host but the middle one of 513 swaps
    assert any(c["path"] == "$.hosts.gpu001.interfaces.mgmt.address" for c in changes)
    # the same plan without a lock of its own is allocated from OLD's: nothing moves
    new.with_name("cluster.lock.json").unlink()
    assert run(capsys, "diff", str(plan), str(new))[:2] == (0, "no changes\n")


def test_moving_the_gateway_onto_a_host_is_refused_with_the_host_named(plan, capsys):
    held = lock_of(plan)["networks"]["mgmt"]["hosts"]["gpu001"]
    before = lock_of(plan)
    plan.write_text(plan_text(gateway=held))
    code, _, err = run(capsys, "lock", str(plan))
    assert code == 1
    assert "error[locked-address-lost] $.networks.mgmt.gateway" in err
    assert f"gpu001 ({held})" in err
    assert lock_of(plan) == before
    code, out, _ = run(capsys, "lock", "--allow-moves", str(plan))
    assert code == 0
    assert f"moved gpu001 on mgmt: {held} -> " in out


def test_renaming_a_profile_with_the_same_content_is_no_destructive_change(plan, capsys, tmp_path):
    new = tmp_path / "new" / "cluster.yml"
    new.parent.mkdir()
    new.write_text(plan_text(profile="h100-node"))
    code, out, _ = run(capsys, "diff", "--format", "json", str(plan), str(new))
    changes = result(out)
    assert code == 0
    assert not [c for c in changes if c["destructive"]]
    assert {c["impact"] for c in changes} <= {"none"}


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_the_lock_is_written_for_the_umask_not_0600(tmp_path, capsys, umask):
    path = tmp_path / "cluster.yml"
    path.write_text(plan_text(count=4))
    path.chmod(0o640)
    old = os.umask(umask)
    try:
        assert run(capsys, "lock", str(path))[0] == 0
    finally:
        os.umask(old)
    lock = path.with_name("cluster.lock.json")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o640  # the plan's mode
    lock.chmod(0o664)
    path.write_text(plan_text(count=5))
    assert run(capsys, "lock", str(path))[0] == 0
    assert stat.S_IMODE(lock.stat().st_mode) == 0o664  # a lock keeps its own mode
