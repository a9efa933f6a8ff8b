"""At the end of a run, one short line per lost or failed host, after the PLAY RECAP."""

from __future__ import annotations

DOCUMENTATION = r"""
name: problem_summary
type: aggregate
short_description: Name the unreachable and failed hosts at the end of a run
description:
  - After the PLAY RECAP, prints C(unreachable:) with each host Ansible lost and why, and
    C(failed:) with each host that failed and the task it failed in; prints nothing when
    every host succeeded.
  - The stdout callback's output is left as it is.
requirements:
  - enable it in ansible.cfg (C(callbacks_enabled = cluster_plan.cluster.problem_summary))
"""

import re
from typing import Any

from ansible.executor.stats import AggregateStats
from ansible.plugins.callback import CallbackBase

REASON_CHARS = 160  # one readable line: ssh's message is long and says the same twice


def _one_line(text: Any) -> str:
    line = " ".join(str(text or "").split())
    # ssh's own words, after Ansible's "... can be reached over ssh: " or, under the
    # mitogen_linear strategy, "Task failed: EOF on stream; last 100 lines received: "
    line = re.split(r"(?:over|via) ssh: |last \d+ lines received: ", line)[-1]
    # Mitogen, when the host went away during a task: its long apology, then the cause
    lost = re.search(r"Mitogen was disconnected .*? Original error was: (.*)", line)
    if lost:
        line = f"lost during a task: {lost.group(1)}"
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def summary(
    unreachable: dict[str, str], failed: dict[str, str], stats: dict[str, dict[str, int]]
) -> list[str]:
    """The summary lines: hosts the final stats count as unreachable or failed (a rescued or
    ignored failure is neither), each with the first reason seen for it."""
    lost = sorted(h for h, row in stats.items() if row.get("unreachable"))
    broken = sorted(h for h, row in stats.items() if row.get("failures") and h not in lost)
    if not lost and not broken:
        return []
    lines = ["RUN SUMMARY"]
    if lost:
        lines.append(
            "unreachable: " + "; ".join(f"{h} ({unreachable.get(h, 'unreachable')})" for h in lost)
        )
    if broken:
        lines.append("failed: " + "; ".join(f"{h} ({failed.get(h, 'a task')})" for h in broken))
    return lines


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cluster_plan.cluster.problem_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._unreachable: dict[str, str] = {}
        self._failed: dict[str, str] = {}

    def v2_runner_on_unreachable(self, result: Any) -> None:
        reason = _one_line(result._result.get("msg"))
        self._unreachable.setdefault(result._host.get_name(), reason)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        if not ignore_errors:
            self._failed.setdefault(result._host.get_name(), _one_line(result._task.get_name()))

    def v2_playbook_on_stats(self, stats: AggregateStats) -> None:
        rows = {host: stats.summarize(host) for host in stats.processed}
        for line in summary(self._unreachable, self._failed, rows):
            self._display.display(line, stderr=False)
