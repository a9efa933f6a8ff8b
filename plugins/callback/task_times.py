"""At the end of a run, the tasks that took the longest (wall time, all hosts together)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: task_times
type: aggregate
short_description: List the slowest tasks of a run after the recap
description:
  - Times each task (and handler) from its start to the start of the next, which is the
    wall time the play spent on it across all hosts, and adds up tasks of the same role and
    name (a task in a loop of plays, or included more than once).
  - After the PLAY RECAP prints C(SLOWEST TASKS) and the slowest ones with their seconds and
    share of the run; with C(CLUSTER_PLAN_TASK_TIMES) set to a file name it also writes every
    task's seconds there as JSON, for benchmarks.
  - Off unless enabled; the benchmarks enable it for the runs they time.
options:
  top:
    description: How many tasks to list.
    type: int
    default: 15
    env:
      - name: CLUSTER_PLAN_TASK_TIMES_TOP
requirements:
  - enable it (C(ANSIBLE_CALLBACKS_ENABLED=cluster_plan.cluster.task_times))
"""

import json
import os
import time
from typing import Any

from ansible.executor.stats import AggregateStats
from ansible.plugins.callback import CallbackBase


def slowest(times: dict[str, float], top: int) -> list[str]:
    """The `top` slowest tasks as lines: seconds, share of the total, name."""
    total = sum(times.values()) or 1.0
    ranked = sorted(times.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [f"{s:8.1f} s {100 * s / total:5.1f} %  {name}" for name, s in ranked]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cluster_plan.cluster.task_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._times: dict[str, float] = {}
        self._current: str | None = None
        self._since = 0.0

    def _close(self) -> None:
        now = time.monotonic()
        if self._current is not None:
            self._times[self._current] = self._times.get(self._current, 0.0) + now - self._since
        self._current, self._since = None, now

    def _open(self, task: Any, prefix: str = "") -> None:
        self._close()
        self._current = prefix + task.get_name()  # "role : task" for a role's task

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._open(task)

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._open(task, "handler ")

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._close()  # the gap between plays is no task's

    def v2_playbook_on_stats(self, stats: AggregateStats) -> None:
        self._close()
        path = os.environ.get("CLUSTER_PLAN_TASK_TIMES")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump(self._times, out, indent=1, sort_keys=True)
        self._display.display("SLOWEST TASKS", stderr=False)
        for line in slowest(self._times, int(self.get_option("top"))):
            self._display.display(line, stderr=False)
