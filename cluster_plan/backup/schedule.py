"""How old a node's last snapshot may be: the longest gap of its timer's calendar expression
(as systemd-analyze lists the next elapses), its random delay and a grace for the run.

Node side: standard library only.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import subprocess

from cluster_plan.backup.settings import Config

_ELAPSE = re.compile(r"(?:Next elapse|Iter\. #\d+):\s+\w+\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def calendar_max_gap(text: str) -> float | None:
    """The longest gap between consecutive elapses in `systemd-analyze calendar
    --iterations=N` output, in seconds (None when it lists fewer than two)."""
    times = [dt.datetime.fromisoformat(m) for m in _ELAPSE.findall(text)]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    return max(gaps) if gaps else None


def max_age_s(cfg: Config) -> float | None:
    """How old the last snapshot may be: the schedule's longest gap, its random delay and a
    grace for the run itself."""
    try:
        done = subprocess.run(
            ["systemd-analyze", "calendar", "--iterations=8", cfg.schedule],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    gap = calendar_max_gap(done.stdout)
    return None if gap is None else gap + cfg.randomized_delay_s + cfg.grace_s
