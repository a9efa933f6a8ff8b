"""Hand changes and a lost node, put right by site.yml, on the converged session lab.

Two proofs share one cycle (tests/roles/hand_changes_cycle.py): two site.yml runs, or three
when the lost node's CephFS client was evicted while it was away, instead of four (issue 25):

- the stage gate (playbooks/tasks/stage_gate.yml): one hand change of each kind the records
  hold, spread over the stages and hosts; the next site.yml runs exactly the stages they
  touch, says why, puts every one of them right, and the run after it skips every stage again;
- a node lost in the middle of site.yml: in that same run, when its storage stage starts, the
  last compute node's links go down for the rest of the run (`cluster-plan lab fault NODE
  --down --duration N`, stopped with SIGINT when the run ends; at the latest the fault ends
  by itself after N s). The play goes on without it on every other host; the run exits
  non-zero and ends with the summary naming the node (callback
  cluster_plan.cluster.problem_summary). Once the node is back, the second site.yml converges
  it and changes nothing anywhere else; the stage gate's "run after" is the first run with
  the lost node converged before it (the second, or a third when the second changed it).

No hand change is on the lost node, nor names it: what its stages would put right there
ends with it."""

from __future__ import annotations

import pytest
from hand_changes_cycle import (
    CHANGES,
    GATED,
    Cycle,
    no_change,
    run_cycle,
    skipped_stages,
    why,
)

from cluster_plan.lab.converge import changed_lines, recap

# The shared session fixtures (`lab`, `converged_lab`), requested below.
from cluster_plan.lab.pytest_plugin import Converged, converged_lab, lab  # noqa: F401

# Two or three site.yml runs: `make test-extended` (docs/lab.md, CI's time limit).
pytestmark = [pytest.mark.lab, pytest.mark.lab_changes, pytest.mark.lab_extended]


@pytest.fixture(scope="module")
def cycle(converged_lab: Converged) -> Cycle:  # noqa: F811
    """The hand changes, site.yml losing the last compute node, site.yml again."""
    converged_lab.require_converged()
    expanded = converged_lab.expanded
    return run_cycle(list(expanded["hosts"]), expanded["groups"]["slurm_compute"][-1])


def test_a_node_lost_mid_site_yml_is_named_and_converges_when_back(cycle: Cycle) -> None:
    victim, others, output = cycle.victim, cycle.others, cycle.lost.output
    rows = recap(output)
    assert cycle.lost.rc != 0, output[-4000:]
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

    again = cycle.again
    assert again.ok, again.output[-4000:]
    after = recap(again.result.stdout)
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in after.values()), after
    assert after[victim]["ok"] > 0
    changed = {h: after[h]["changed"] for h in others if after[h]["changed"]}
    assert changed == {}, "\n".join(changed_lines(again.result.stdout))
    print(
        f"\n{victim} lost at the storage stage: site.yml ended rc={cycle.lost.rc} in "
        f"{cycle.lost.seconds:.0f}s, {len(others)} other hosts without failure; summary: "
        + " | ".join(ln for ln in summary if ln.startswith(("unreachable:", "failed:")))
        + f"\nre-run after it came back: {again.seconds:.0f}s, {victim} changed="
        f"{after[victim]['changed']}, every other host changed=0"
    )


def test_hand_changes_run_their_stages_and_are_put_right(cycle: Cycle) -> None:
    output = cycle.lost.output
    # The run's one problem is the node it lost (the test above): no host with a hand
    # change, nor any other, failed or was lost, and the summary names no failed task.
    rows = recap(output)
    assert {h: rows[h] for h in cycle.others if rows[h]["failed"] or rows[h]["unreachable"]} == {}
    summary = output[output.rindex("PLAY RECAP") :].splitlines()
    assert not any(ln.startswith("failed: ") for ln in summary), summary
    skipped = skipped_stages(output)
    touched = {stage for *_, stage in CHANGES}
    assert not touched & set(skipped), skipped
    assert set(GATED) - touched <= set(skipped), skipped
    reasons = why(output)
    assert "/etc/hosts is file root:root 0600, was file root:root 0644" in reasons["cpu01"]
    assert "the host name changed" in reasons["cpu01"]
    assert "the plan's users changed" in reasons["gpu02"]
    assert "the pools changed" in reasons["stor01"]
    assert "the accounting database's QOS, accounts and users changed" in reasons["head01"]
    assert "file /etc/slurm/cgroup.conf is gone" in reasons["gpu01"]
    for (host, check), value in cycle.planned.items():
        assert cycle.after_lost[(host, check)] == value, f"{host}: {check} not put right"
    # the run after them, once the lost node is converged too, skips every stage again
    settled = cycle.settled
    assert settled.ok, settled.result.stdout[-4000:]
    assert set(skipped_stages(settled.output)) == set(GATED), settled.output[-4000:]
    assert no_change(settled.output) == {}, "\n".join(changed_lines(settled.output))
    which = "the re-run" if settled is cycle.again else "the run after the re-run"
    print(
        f"\n{len(CHANGES)} hand changes put right by the run that lost {cycle.victim} "
        f"({cycle.lost.seconds:.0f}s); {which} skipped {', '.join(GATED)} "
        f"({settled.seconds:.0f}s)"
    )
