"""The consistency hooks a role declares with its precious state (before_backup,
restore_before, restore_after): shell commands whose failure is reported in their own words.

Node side: standard library only.
"""

from __future__ import annotations

import subprocess

from cluster_plan.backup.settings import BackupError

HOOK_TIMEOUT_S = 900


def run_hook(what: str, command: str | None) -> None:
    if not command:
        return
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            capture_output=True,
            text=True,
            timeout=HOOK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BackupError(f"{what}: timed out after {HOOK_TIMEOUT_S}s") from None
    if done.returncode != 0:
        words = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise BackupError(f"{what} failed ({done.returncode}): {words[0]}")
