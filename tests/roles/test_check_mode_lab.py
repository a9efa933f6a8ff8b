"""`site.yml --check` on the converged session lab: every stage in full, nothing to change.

One check-mode run of the whole build proves what the Slurm and Ceph modules each proved with
a run of their own stages (common and Slurm; storage): on a lab that site.yml converged, check
mode reports no change on any host and fails nowhere. It runs under Ansible's own linear
strategy, the fallback where Mitogen cannot be used (ansible.cfg runs mitogen_linear), so
every stage stays proven without Mitogen. It only reads the lab, so the session's
converge runs it beside the idempotence run, before any test touches the lab
(tests/support/lab_session.py `converge_runs`); this test judges that run.

CLUSTER_PLAN_LAB_CONVERGED=1 uses the lab already running under $CLUSTER_PLAN_LAB_ID as it is:
the test runs the check-mode run itself; the assertion on the converge's own output then skips.
"""

from __future__ import annotations

import pytest
from lab_helpers import PLAN

# The shared session fixtures (`lab`, `converged_lab`).
from support.lab_session import (  # noqa: F401
    CHECK_STRATEGY,
    FULL_RUN,
    PLAYBOOKS,
    Converged,
    converged_lab,
    lab,
)
from support.playbooks import ansible_env, changed_lines, playbook, recap

pytestmark = pytest.mark.lab

# A task of each stage the check run must reach, and the converge must have run: a stage the
# gate or a tag skipped would report no change without proving anything.
STAGE_TASKS = (
    "TASK [common : Install the baseline packages]",
    "TASK [ceph : Create, or find and activate, one OSD per planned disk]",
    "TASK [nfs : Write ganesha.conf from the plan]",
    "TASK [slurm : Write slurm.conf, gres.conf, topology.conf and cgroup.conf]",
)


def test_check_mode_of_every_stage_reports_no_change(converged_lab: Converged) -> None:  # noqa: F811
    converged_lab.require_converged()
    # every task in check mode: the stage gate would skip every stage of a converged lab
    run = converged_lab.check or playbook(
        PLAN, PLAYBOOKS, "--check", *FULL_RUN, env={**ansible_env(), **CHECK_STRATEGY}
    )
    assert run.ok, run.result.stdout[-3000:]
    rows = recap(run.result.stdout)
    assert set(rows) >= set(converged_lab.expanded["hosts"])
    changed = {h: r["changed"] for h, r in rows.items() if r["changed"]}
    assert changed == {}, "\n".join(changed_lines(run.result.stdout))
    missing = [task for task in STAGE_TASKS if task not in run.output]
    assert missing == [], missing
    # the storage stage ran in the converge itself (its OSDs and exports were made there)
    first, _ = converged_lab.require_runs()
    assert [task for task in STAGE_TASKS[1:3] if task not in first.output] == []
