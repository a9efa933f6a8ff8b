"""BorgBackup as the backup program runs it: the environment that points borg at one of the
node's repositories (key, known hosts, passphrase command), borg's own words for a failure,
the retention rules and the latest snapshot of this node.

Node side: standard library only.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster_plan.backup.settings import BackupError, Config, Repository


def borg_env(cfg: Config, repo: Repository) -> dict[str, str]:
    ssh = (
        f"ssh -i {cfg.ssh_key} -o IdentitiesOnly=yes -o BatchMode=yes"
        f" -o UserKnownHostsFile={cfg.known_hosts} -o StrictHostKeyChecking=yes"
        " -o ServerAliveInterval=30 -o ConnectTimeout=20"
    )
    return {
        **os.environ,
        "BORG_REPO": repo.url,
        "BORG_RSH": ssh,
        # the passphrase never appears on a command line or in the environment
        "BORG_PASSCOMMAND": f"cat {cfg.passphrase_file}",
        "BORG_BASE_DIR": str(Path(cfg.state_dir) / "borg"),
        "BORG_RELOCATED_REPO_ACCESS_IS_OK": "no",
        "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "no",
        "LANG": "C.UTF-8",
    }


def borg(
    cfg: Config, repo: Repository, args: Sequence[str], cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["borg", *args],
        env=borg_env(cfg, repo),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def borg_ok(
    cfg: Config,
    repo: Repository,
    args: Sequence[str],
    cwd: str | None = None,
    warnings_ok: bool = True,
) -> str:
    """Run borg; its stdout, or BackupError with its last words. Exit 1 is borg's warning: in
    `create` a file that changed while it was read, but in `check` and `extract` a problem."""
    done = borg(cfg, repo, args, cwd)
    if done.returncode != 0 and (done.returncode != 1 or not warnings_ok):
        words = borg_error(done.stderr)
        raise BackupError(f"borg {args[0]} on {repo.name} failed ({done.returncode}): {words}")
    return done.stdout


_EXCEPTION = re.compile(r"^[\w.]+(Error|Exception): ")
_BORG_FOOTER = ("Traceback", "Platform:", "Linux:", "Borg:", "PID:", "sys.argv:", "SSH_ORIG")


def borg_error(stderr: str) -> str:
    """borg's own words for a failure, without the traceback and platform footer it prints."""
    lines = [
        line.strip()
        for line in stderr.splitlines()
        if line.strip()
        and not line.startswith((" ", *_BORG_FOOTER))
        and not _EXCEPTION.match(line)  # the traceback's last line repeats the message
    ]
    errors = [line for line in lines if "rror" in line or "mismatch" in line]
    return (errors or lines or ["no message"])[0]


def retention_args(retention: dict[str, int]) -> list[str]:
    return [f"--keep-{k}={retention[k]}" for k in ("daily", "weekly", "monthly")
            if retention.get(k)]  # fmt: skip


def latest_archive(cfg: Config, repo: Repository) -> dict[str, Any]:
    listing = json.loads(
        borg_ok(cfg, repo, ["list", "--json", "--last", "1", "--glob-archives", cfg.prefix + "*"])
    )
    archives = listing.get("archives") or []
    if not archives:
        raise BackupError(f"{repo.name}: no snapshot of {cfg.host} yet")
    return dict(archives[-1])


def archive_time(archive: dict[str, Any]) -> float:
    """borg prints local times without a zone; this node's zone is the one it used."""
    return dt.datetime.fromisoformat(archive["start"]).timestamp()
