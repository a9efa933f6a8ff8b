"""A node lost in the middle of site.yml, on the converged session lab.

The session converge (support.lost_node) runs site.yml again after its gated re-run; when
the storage stage starts, the last compute node's links go down for the rest of the run.
The play goes on without it on every other host; the run exits non-zero and ends with the
summary naming the node (callback cluster_plan.cluster.problem_summary). Once the node is
back, a second site.yml converges it and changes nothing anywhere else.
"""

from __future__ import annotations

import pytest

# The shared session fixtures (`lab`, `converged_lab`), requested below.
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.playbooks import changed_lines, recap

pytestmark = pytest.mark.lab


def test_a_node_lost_mid_site_yml_is_named_and_converges_when_back(
    converged_lab: Converged,  # noqa: F811
) -> None:
    converged_lab.require_converged()
    found = converged_lab.lost
    if found is None:
        if converged_lab.second is None:
            pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: no converge ran in this session")
        pytest.fail("the converge's gated re-run failed: no node was lost after it")
    assert found.error == "" and found.lost is not None, found.error
    victim, output = found.victim, found.lost.output
    others = [h for h in converged_lab.expanded["hosts"] if h != victim]
    rows = recap(output)
    assert found.lost.result.returncode != 0, output[-4000:]
    assert rows[victim]["unreachable"] >= 1, rows
    assert {h: rows[h] for h in others if rows[h]["failed"] or rows[h]["unreachable"]} == {}
    summary = output[output.rindex("PLAY RECAP") :].splitlines()
    assert "RUN SUMMARY" in summary, summary
    assert [ln for ln in summary if ln.startswith("unreachable: ")] == [
        next(ln for ln in summary if ln.startswith(f"unreachable: {victim} ("))
    ]
    assert not any(ln.startswith("failed: ") for ln in summary), summary
    # one red line for the lost node, none for any other host
    fatal = [ln for ln in output.splitlines() if ln.startswith("fatal: [")]
    assert all(ln.startswith(f"fatal: [{victim}]") for ln in fatal) and len(fatal) <= 2, fatal

    again = found.again
    assert again is not None and again.ok, again.output[-4000:] if again else "no re-run"
    after = recap(again.result.stdout)
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in after.values()), after
    assert after[victim]["ok"] > 0
    changed = {h: after[h]["changed"] for h in others if after[h]["changed"]}
    assert changed == {}, "\n".join(changed_lines(again.result.stdout))
    # given back to Slurm for the tests after this one (support.lost_node)
    assert found.slurm_state and not found.slurm_state.startswith("down"), found.slurm_state
    print(
        f"\n{victim} lost at the storage stage: site.yml ended "
        f"rc={found.lost.result.returncode} in {found.lost.seconds:.0f}s, "
        f"{len(others)} other hosts without failure; summary: "
        + " | ".join(ln for ln in summary if ln.startswith(("unreachable:", "failed:")))
        + f"\nre-run after it came back: {again.seconds:.0f}s, {victim} changed="
        f"{after[victim]['changed']}, every other host changed=0"
    )
