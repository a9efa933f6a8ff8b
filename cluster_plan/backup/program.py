"""cluster-plan-backup: a node's backups with BorgBackup, as the cluster plan describes them.

The backup role ships these modules to every node as one zip (cluster_plan.node_bundle,
program `backup`) and installs /usr/local/sbin/cluster-plan-backup, which runs it with the
distribution's python3; the systemd timer runs `cluster-plan-backup run`. What is backed up:
the plan's `sources` plus the precious state every role declares in its manifest
(/var/lib/cluster-plan/manifest/ROLE.json, written by the cluster_plan.cluster.role_manifest
module), after each declaration's consistency hook.

  run                    back up to every repository, prune, then run the restore drill
  drill                  restore the latest snapshot to scratch, compare it, check the repository
  status                 print the last results as JSON (read by `cluster-plan backup status`)
  init                   create the repositories that do not exist yet
  restore                put declared state (--name) or single paths (--path) back
  borg ARGS...           run borg against a repository with this node's settings

Standard library only: it runs on every node with the distribution's python3 and borg
(tests/day2/test_backup_program.py runs it where nothing else can be imported).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from cluster_plan.backup.borg import borg_env
from cluster_plan.backup.jobs import init, run_backup, run_drill, show_status
from cluster_plan.backup.restore import restore
from cluster_plan.backup.settings import CONFIG, BackupError, Config, Repository, load_config

DESCRIPTION = (
    "cluster-plan-backup: a node's backups with BorgBackup, as the cluster plan describes them."
)


def pick_repository(cfg: Config, name: str | None) -> Repository:
    for repo in cfg.repositories:
        if name in (None, repo.name):
            return repo
    raise BackupError(
        f"no repository {name!r} (have {', '.join(r.name for r in cfg.repositories)})"
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="cluster-plan-backup", description=DESCRIPTION)
    top.add_argument("--config", type=Path, default=CONFIG)
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="back up, prune, then drill")
    sub.add_parser("drill", help="restore the latest snapshot to scratch and compare")
    sub.add_parser("status", help="the last results, as JSON")
    sub.add_parser("init", help="create missing repositories")
    rest = sub.add_parser("restore", help="put declared state or paths back")
    rest.add_argument("--name", action="append", default=[], help="precious state, e.g. slurmctld")
    rest.add_argument("--path", action="append", default=[], help="an absolute path")
    rest.add_argument("--archive", help="default: the latest")
    rest.add_argument("--repository", help="target (default) or offsite")
    rest.add_argument("--dry-run", action="store_true", help="list what would be restored")
    raw = sub.add_parser("borg", help="borg with this node's repository settings")
    raw.add_argument("--repository", help="target (default) or offsite")
    raw.add_argument("args", nargs=argparse.REMAINDER)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cfg = load_config(args.config)
        if args.command == "run":
            return run_backup(cfg)
        if args.command == "drill":
            return run_drill(cfg)
        if args.command == "status":
            return show_status(cfg)
        if args.command == "init":
            return init(cfg)
        if args.command == "restore":
            repo = pick_repository(cfg, args.repository)
            return restore(cfg, repo, args.name, args.path, args.archive, args.dry_run)
        repo = pick_repository(cfg, args.repository)
        rest = args.args[1:] if args.args[:1] == ["--"] else args.args
        return subprocess.run(["borg", *rest], env=borg_env(cfg, repo), check=False).returncode
    except BackupError as exc:
        print(f"cluster-plan-backup: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
