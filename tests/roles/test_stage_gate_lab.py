"""The stage gate of site.yml on the converged session lab (playbooks/tasks/stage_gate.yml).

A re-run where nothing changed skips every gated stage (common, ceph, nfs, slurm, backup)
and changes nothing; the idempotence run before it ran every stage in full
(`-e site_converge_when=always`). The hand changes the gate must see, and the runs that put
them right, are tests/roles/test_hand_changes_cycle_lab.py's (one cycle shared with the
node lost mid-run).
"""

from __future__ import annotations

import pytest
from hand_changes_cycle import no_change, skipped_stages

from cluster_plan.lab.converge import changed_lines

# The shared session fixtures (`lab`, `converged_lab`), requested below.
from cluster_plan.lab.pytest_plugin import Converged, converged_lab, lab  # noqa: F401

pytestmark = pytest.mark.lab


def test_a_rerun_where_nothing_changed_skips_every_gated_stage(converged_lab: Converged) -> None:  # noqa: F811
    converged_lab.require_converged()
    second, gated = converged_lab.second, converged_lab.gated
    if second is None or gated is None:
        pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: no converge ran in this session")
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
        "backup": len(hosts),
    }
    assert "TASK [common : " not in gated.output and "TASK [ceph : " not in gated.output
    print(f"re-run: {gated.seconds:.0f} s through the gate, {second.seconds:.0f} s in full")
