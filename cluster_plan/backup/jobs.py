"""What the backup program's commands do to the repositories: create a snapshot, prune and
compact, run the drill, create missing repositories, and keep the node's status file
(STATE_DIR/status.json, read by `cluster-plan backup status`).

Node side: standard library only.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from typing import Any

from cluster_plan.backup.borg import borg, borg_error, borg_ok, retention_args
from cluster_plan.backup.drill import drill
from cluster_plan.backup.hooks import run_hook
from cluster_plan.backup.schedule import max_age_s
from cluster_plan.backup.settings import (
    BackupError,
    Config,
    Precious,
    Repository,
    existing_paths,
    read_declarations,
)


def create(cfg: Config, repo: Repository, declarations: list[Precious]) -> dict[str, Any]:
    paths = existing_paths(declarations)
    if not paths:
        raise BackupError("nothing to back up on this host")
    excludes = [
        arg for d in declarations for pattern in d.exclude for arg in ("--exclude", pattern)
    ]
    args = ["create", "--json", "--compression", cfg.compression,
            "--lock-wait", str(cfg.lock_wait_s), *excludes,
            f"::{cfg.prefix}{{now:%Y-%m-%dT%H:%M:%S}}", *paths]  # fmt: skip
    report = json.loads(borg_ok(cfg, repo, args))
    archive = report["archive"]
    return {
        "archive": archive["name"],
        "time": dt.datetime.fromisoformat(archive["start"]).timestamp(),
        "original_size": archive["stats"]["original_size"],
        "deduplicated_size": archive["stats"]["deduplicated_size"],
        "files": archive["stats"]["nfiles"],
        "paths": paths,
    }


def prune(cfg: Config, repo: Repository) -> None:
    keep = retention_args(cfg.retention)
    if not keep:  # no rule at all: borg would refuse; keep everything
        return
    borg_ok(cfg, repo, ["prune", "--lock-wait", str(cfg.lock_wait_s),
                        "--glob-archives", cfg.prefix + "*", *keep])  # fmt: skip
    borg_ok(cfg, repo, ["compact", "--lock-wait", str(cfg.lock_wait_s)])


def read_status(cfg: Config) -> dict[str, Any]:
    try:
        data = json.loads(cfg.status_file.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_status(cfg: Config, status: dict[str, Any]) -> None:
    cfg.status_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = cfg.status_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(status, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, cfg.status_file)


# what a failed run keeps of the last good one, so that the age of the last snapshot shows
KEPT_ON_FAILURE = ("archive", "time", "original_size", "deduplicated_size", "files")


def run_backup(cfg: Config) -> int:
    status = read_status(cfg)
    status["host"] = cfg.host
    repos = status.setdefault("repositories", {})
    failed = False
    declarations = read_declarations(cfg.manifest_dir, cfg.sources)
    hook_errors = []
    for declaration in declarations:
        try:
            run_hook(f"before_backup of {declaration.name}", declaration.before_backup)
        except BackupError as exc:
            hook_errors.append(str(exc))  # back the rest up anyway, and fail the run
    for repo in cfg.repositories:
        started = time.time()
        entry: dict[str, Any] = {"attempt": started}
        try:
            entry.update(create(cfg, repo, declarations))
            entry.update(ok=not hook_errors, error="; ".join(hook_errors) or None)
            prune(cfg, repo)
            entry["seconds"] = round(time.time() - started, 3)  # create, prune and compact
        except BackupError as exc:
            previous = repos.get(repo.name, {})
            entry.update({k: previous[k] for k in KEPT_ON_FAILURE if k in previous})
            entry.update(ok=False, error=str(exc))
        repos[repo.name] = entry
        failed |= not entry["ok"]
        if cfg.restore_test:
            record = drill(cfg, repo)
            status.setdefault("drills", {})[repo.name] = record
            failed |= not record["ok"]
        write_status(cfg, status)
        print(json.dumps({repo.name: entry}))
    return 1 if failed else 0


def run_drill(cfg: Config) -> int:
    status = read_status(cfg)
    failed = False
    for repo in cfg.repositories:
        record = drill(cfg, repo)
        status.setdefault("drills", {})[repo.name] = record
        failed |= not record["ok"]
        print(json.dumps(record))
    write_status(cfg, status)
    return 1 if failed else 0


def show_status(cfg: Config) -> int:
    status = read_status(cfg)
    status.update(
        host=cfg.host,
        now=time.time(),
        max_age_s=max_age_s(cfg),
        restore_test=cfg.restore_test,
        expected=[r.name for r in cfg.repositories],
    )
    print(json.dumps(status, sort_keys=True))
    return 0


def init(cfg: Config) -> int:
    for repo in cfg.repositories:
        done = borg(cfg, repo, ["init", "--encryption=repokey-blake2"])
        if done.returncode == 0:
            print(f"created {repo.name} repository {repo.url}")
        elif "already exists" in done.stderr:
            print(f"{repo.name} repository exists")
        else:
            words = borg_error(done.stderr)
            raise BackupError(f"borg init on {repo.name} failed ({done.returncode}): {words}")
    return 0
