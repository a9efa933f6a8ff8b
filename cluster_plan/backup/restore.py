"""Putting declared state (by name) or single paths back from a snapshot: the request
checked against the node's declarations, the restore_before/restore_after hooks around it,
and what stood in the way kept beside the restored path, never lost.

Node side: standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cluster_plan.backup.borg import borg_ok, latest_archive
from cluster_plan.backup.hooks import run_hook
from cluster_plan.backup.settings import (
    BackupError,
    Config,
    Precious,
    Repository,
    read_declarations,
)


def restore_plan(
    declarations: list[Precious], names: Sequence[str], paths: Sequence[str]
) -> tuple[list[Precious], list[str]]:
    """The declarations and paths a restore puts back; BackupError naming what is unknown."""
    by_name = {d.name: d for d in declarations}
    _check_restore_request(by_name, names, paths)
    chosen = [by_name[n] for n in names]
    wanted = [p for d in chosen for p in d.paths] + list(paths)
    return chosen, list(dict.fromkeys(p.rstrip("/") or "/" for p in wanted))


def _check_restore_request(
    by_name: dict[str, Precious], names: Sequence[str], paths: Sequence[str]
) -> None:
    """Refuses an unknown state name, a relative path, or a request naming nothing."""
    if unknown := [n for n in names if n not in by_name]:
        known = ", ".join(sorted(by_name)) or "none"
        raise BackupError(f"no precious state named {', '.join(unknown)} here (known: {known})")
    if bad := [p for p in paths if not p.startswith("/")]:
        raise BackupError(f"paths must be absolute: {', '.join(bad)}")
    if not names and not paths:
        raise BackupError("name what to restore: --name STATE or --path PATH")


def put_back(staging: Path, path: str, stamp: str) -> str:
    """Move a restored path into place; what stood there is kept beside it, never lost."""
    restored = staging / path.lstrip("/")
    target = Path(path)
    kept = ""
    if target.exists() or target.is_symlink():
        aside = target.with_name(f"{target.name}.before-restore-{stamp}")
        shutil.move(str(target), aside)
        kept = f" (the previous one is kept as {aside})"
    target.parent.mkdir(parents=True, exist_ok=True)
    if os.lstat(restored).st_dev == os.stat(target.parent).st_dev:
        os.rename(restored, target)
    else:
        # Across file systems (an HA pair's state on CephFS or NFS; staging on the node's
        # disk) a rename cannot work and shutil.move's copy drops owners: slurmctld could not
        # write a state directory restored as root's. cp -a keeps owners, modes, times, links.
        copied = subprocess.run(
            ["cp", "-a", "--", str(restored), str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
        if copied.returncode != 0:
            raise BackupError(f"cannot put {path} back: {copied.stderr.strip()}")
    return f"restored {path}{kept}"


def restore(
    cfg: Config,
    repo: Repository,
    names: Sequence[str],
    paths: Sequence[str],
    archive: str | None,
    dry_run: bool,
) -> int:
    declarations = read_declarations(cfg.manifest_dir, cfg.sources)
    chosen, wanted = restore_plan(declarations, names, paths)
    name = archive or latest_archive(cfg, repo)["name"]
    members = [p.lstrip("/") for p in wanted]
    if dry_run:
        listing = borg_ok(cfg, repo, ["list", "--short", f"::{name}", *members])
        print(json.dumps({"archive": name, "would_restore": wanted,
                          "entries": len(listing.splitlines())}))  # fmt: skip
        return 0
    for declaration in reversed(chosen):
        run_hook(f"restore_before of {declaration.name}", declaration.restore_before)
    try:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        staging_parent = Path(cfg.state_dir) / "restore"
        staging_parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=staging_parent) as staging:
            borg_ok(cfg, repo, ["extract", f"::{name}", *members], cwd=staging, warnings_ok=False)
            if absent := [p for p in wanted if not os.path.lexists(Path(staging, p.lstrip("/")))]:
                raise BackupError(f"{name} holds no {', '.join(absent)}")
            for path in wanted:
                print(put_back(Path(staging), path, stamp))
    finally:
        # what was stopped for the restore runs again, restored or not
        for declaration in chosen:
            run_hook(f"restore_after of {declaration.name}", declaration.restore_after)
    print(f"restored from {repo.name} archive {name}")
    return 0
