"""A node lost in the middle of site.yml, on the converged session lab.

site.yml runs again on the converged lab; when its storage stage starts, the last compute
node's links go down for the rest of the run (`cluster-plan lab fault NODE --down --duration
N`, stopped with SIGINT when the run ends; at the latest the fault ends by itself after N s).
The play goes on without it on every other host; the run exits non-zero and ends
with the summary naming the node (callback cluster_plan.cluster.problem_summary). Once the
node is back, a second site.yml converges it and changes nothing anywhere else. Two playbook
runs in all (each a few minutes on the lab)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest
from lab_helpers import BIN, PLAN, ROOT, cli

# The shared session fixtures (`lab`, `converged_lab`), requested below.
from support.lab_session import (  # noqa: F401
    Converged,
    converged_lab,
    lab,
    sigint_default,
)
from support.playbooks import ansible_env, changed_lines, playbook, recap

pytestmark = pytest.mark.lab
TRIGGER = "PLAY [Ceph from the cluster plan]"  # the storage stage: part-way through site.yml
RUN_TIMEOUT_S = 1800
# Down until the run ends: a node that came back by itself part-way would be met again by a
# later play (Mitogen reconnects to it), and nothing would have been lost. The bound only
# keeps the fault from outliving a test that died.
DOWN_S = RUN_TIMEOUT_S + 60
DOWN = ["--down", "--duration", str(DOWN_S)]


def _site_losing(victim: str) -> tuple[int, str, float]:
    """site.yml, taking `victim` down when TRIGGER is printed; (rc, output, seconds)."""
    started = time.monotonic()
    run = subprocess.Popen(
        [str(BIN / "ansible-playbook"), "-i", str(PLAN), "site.yml"],
        cwd=ROOT,
        env=ansible_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watchdog = threading.Timer(RUN_TIMEOUT_S, run.kill)  # a hung run must end the test too
    watchdog.start()
    fault: subprocess.Popen[str] | None = None
    lines: list[str] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            lines.append(line)
            if fault is None and line.startswith(TRIGGER):
                fault = subprocess.Popen(
                    [str(BIN / "cluster-plan"), "lab", "fault", str(PLAN), victim, *DOWN],
                    cwd=ROOT,
                    env=ansible_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    preexec_fn=sigint_default,  # stopped with SIGINT when the run ends
                )
        rc = run.wait()
    finally:
        watchdog.cancel()
        if run.poll() is None:
            run.kill()
            run.wait()
        if run.stdout is not None:
            run.stdout.close()
        if fault is not None:
            try:
                fault.send_signal(signal.SIGINT)  # it clears the fault and exits
                fault.wait(timeout=60)
            finally:
                cli("lab", "fault", str(PLAN), victim, "--clear")
    assert fault is not None, f"site.yml never printed {TRIGGER!r}:\n" + "".join(lines[-60:])
    return rc, "".join(lines), time.monotonic() - started


@pytest.mark.lab_changes
@pytest.mark.lab_extended  # make test-extended (docs/lab.md: CI's time limit)
def test_a_node_lost_mid_site_yml_is_named_and_converges_when_back(
    converged_lab: Converged,  # noqa: F811
) -> None:
    converged_lab.require_converged()
    expanded = converged_lab.expanded
    victim = expanded["groups"]["slurm_compute"][-1]
    others = [h for h in expanded["hosts"] if h != victim]

    rc, output, seconds = _site_losing(victim)
    rows = recap(output)
    assert rc != 0, output[-4000:]
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

    again = playbook(PLAN, ["site.yml"], timeout=RUN_TIMEOUT_S)
    assert again.ok, again.output[-4000:]
    after = recap(again.result.stdout)
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in after.values()), after
    assert after[victim]["ok"] > 0
    changed = {h: after[h]["changed"] for h in others if after[h]["changed"]}
    assert changed == {}, "\n".join(changed_lines(again.result.stdout))
    print(
        f"\n{victim} lost at the storage stage: site.yml ended rc={rc} in {seconds:.0f}s, "
        f"{len(others)} other hosts without failure; summary: "
        + " | ".join(ln for ln in summary if ln.startswith(("unreachable:", "failed:")))
        + f"\nre-run after it came back: {again.seconds:.0f}s, {victim} changed="
        f"{after[victim]['changed']}, every other host changed=0"
    )
