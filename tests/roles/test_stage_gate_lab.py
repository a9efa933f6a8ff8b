"""The stage gate of site.yml on the converged session lab (playbooks/tasks/stage_gate.yml).

The idempotence run ran every stage in full (`-e site_converge_when=always`). After it the
session converge made one hand change of each kind the records hold, spread over the stages
and hosts (support.hand_changes), and ran site.yml: that run runs exactly the stages they
touch, says why, and puts every one of them right. The re-run after it, where nothing
changed, skips every gated stage (common, ceph, nfs, slurm, software, backup, monitoring) on
every host and changes nothing.
"""

from __future__ import annotations

import re

import pytest
from lab_helpers import on_node
from support.hand_changes import CHANGES

# The shared session fixtures (`lab`, `converged_lab`), requested below.
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.playbooks import changed_lines, recap

pytestmark = pytest.mark.lab
GATED = ("common", "ceph", "nfs", "slurm", "software", "backup", "monitoring")
SKIPPED = re.compile(r'"msg": "(\w+): the last converge still holds on all (\d+) hosts; skipped')


def skipped_stages(output: str) -> dict[str, int]:
    """{stage's roles: hosts} for every stage the gate skipped in a run."""
    return {role: int(hosts) for role, hosts in SKIPPED.findall(output)}


def sh(host: str, script: str) -> str:
    result = on_node(host, script)
    assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def no_change(output: str) -> dict[str, int]:
    return {h: r["changed"] for h, r in recap(output).items() if r["changed"]}


def test_a_rerun_where_nothing_changed_skips_every_gated_stage(converged_lab: Converged) -> None:  # noqa: F811
    converged_lab.require_converged()
    second, gated = converged_lab.second, converged_lab.gated
    if second is None:
        pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: no converge ran in this session")
    hand = converged_lab.hand.run if converged_lab.hand is not None else None
    assert gated is not None, "no gated re-run: " + (hand.output[-4000:] if hand else "")
    assert skipped_stages(second.output) == {}  # the idempotence run ran every stage
    assert gated.ok, gated.result.stdout[-4000:]
    assert no_change(gated.output) == {}, "\n".join(changed_lines(gated.output))
    hosts = converged_lab.expanded["hosts"]
    slurm_hosts = {
        h
        for h, host in hosts.items()
        if {"slurm_controller", "slurm_compute", "slurmdbd"} & set(host["roles"])
    }
    assert skipped_stages(gated.output) == {
        "common": len(hosts),
        "ceph": len(hosts),
        "nfs": len(hosts),
        "slurm": len(slurm_hosts),
        "software": len(hosts),
        "backup": len(hosts),
        "monitoring": len(hosts),
    }
    assert "TASK [common : " not in gated.output and "TASK [ceph : " not in gated.output
    print(f"re-run: {gated.seconds:.0f} s through the gate, {second.seconds:.0f} s in full")


def test_hand_changes_run_their_stages_and_are_put_right(converged_lab: Converged) -> None:  # noqa: F811
    """The session converge made the ten hand changes (support.hand_changes) after its
    idempotence run, then ran site.yml; the gated re-run above came after that run."""
    converged_lab.require_converged()
    hand = converged_lab.hand
    if hand is None:
        pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: no converge ran in this session")
    assert hand.errors == [], hand.errors
    run = hand.run
    assert run is not None and run.ok, run.result.stdout[-4000:] if run else "no run"
    skipped = skipped_stages(run.output)
    touched = {stage for *_, stage in CHANGES}
    assert not touched & set(skipped), skipped
    assert set(GATED) - touched <= set(skipped), skipped
    reasons = why(run.output)
    assert "/etc/hosts is file root:root 0600, was file root:root 0644" in reasons["cpu01"]
    assert "the host name changed" in reasons["cpu01"]
    assert "the plan's users changed" in reasons["gpu02"]
    assert "the pools changed" in reasons["stor01"]
    assert "the accounting database's QOS, accounts and users changed" in reasons["head01"]
    assert "file /etc/slurm/cgroup.conf is gone" in reasons["gpu01"]
    # read after the gated re-run, which skipped every stage and changed nothing (above):
    # what the lab holds now is what this run left
    for (host, check), value in hand.planned.items():
        assert sh(host, check) == value, f"{host}: {check} not put right"
    print(f"hand changes put right in {run.seconds:.0f} s")


def why(output: str) -> dict[str, str]:
    """Each host's reasons printed by the gate ("Say why the stage runs here"), joined."""
    found: dict[str, list[str]] = {}
    for host, body in re.findall(r'ok: \[([\w.-]+)\] => \{\s+"msg": \[(.*?)\]\s+\}', output, re.S):
        found.setdefault(host, []).append(body)
    return {host: "\n".join(bodies) for host, bodies in found.items()}
