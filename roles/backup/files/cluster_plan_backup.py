#!/usr/bin/python3
"""cluster-plan-backup: a node's backups with BorgBackup, as the cluster plan describes them.

Installed by the backup role as /usr/local/sbin/cluster-plan-backup; the systemd timer runs
`cluster-plan-backup run`. What is backed up: the plan's `sources` plus the precious state
every role declares in its manifest (/var/lib/cluster-plan/manifest/ROLE.json, written by the
cluster_plan.cluster.role_manifest module), after each declaration's consistency hook.

  run                    back up to every repository, prune, then run the restore drill
  drill                  restore the latest snapshot to scratch, compare it, check the repository
  status                 print the last results as JSON (read by `cluster-plan backup status`)
  init                   create the repositories that do not exist yet
  restore                put declared state (--name) or single paths (--path) back
  borg ARGS...           run borg against a repository with this node's settings

Standard library only: it runs on every node with the distribution's python3 and borg.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import itertools
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG = Path("/etc/cluster-plan/backup.json")
HOOK_TIMEOUT_S = 900


class BackupError(Exception):
    """A failure to report in words (exit 1), never a traceback."""


@dataclass(frozen=True)
class Repository:
    name: str  # "target" or "offsite"
    url: str  # ssh://borg@10.40.0.10:22/srv/backup/gpu01


@dataclass(frozen=True)
class Precious:
    name: str
    paths: tuple[str, ...]
    before_backup: str | None = None
    restore_before: str | None = None
    restore_after: str | None = None
    exclude: tuple[str, ...] = ()


@dataclass
class Config:
    host: str
    repositories: list[Repository]
    passphrase_file: str
    ssh_key: str
    known_hosts: str
    state_dir: str
    manifest_dir: str
    sources: list[str] = field(default_factory=list)
    retention: dict[str, int] = field(default_factory=dict)
    restore_test: bool = True
    compression: str = "lz4"
    schedule: str = "daily"
    randomized_delay_s: int = 0
    grace_s: int = 3600
    lock_wait_s: int = 600

    @property
    def status_file(self) -> Path:
        return Path(self.state_dir) / "status.json"

    @property
    def prefix(self) -> str:
        return f"{self.host}-"


def load_config(path: Path = CONFIG) -> Config:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{path}: {exc} (run the backup role on this node)") from None
    repos = [Repository(r["name"], r["url"]) for r in data.pop("repositories")]
    return Config(repositories=repos, **data)


# --- what to back up ----------------------------------------------------------------------


def read_declarations(manifest_dir: str, sources: Sequence[str]) -> list[Precious]:
    """Every role's precious state on this host, then the plan's sources."""
    found: list[Precious] = []
    for manifest in sorted(Path(manifest_dir).glob("*.json")):
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError) as exc:
            raise BackupError(f"{manifest}: unreadable manifest: {exc}") from None
        for item in data.get("precious", []):
            found.append(
                Precious(
                    name=item["name"],
                    paths=tuple(item["paths"]),
                    before_backup=item.get("before_backup"),
                    restore_before=item.get("restore_before"),
                    restore_after=item.get("restore_after"),
                    exclude=tuple(item.get("exclude", ())),
                )
            )
    if sources:
        found.append(Precious(name="sources", paths=tuple(sources)))
    return found


def existing_paths(declarations: Iterable[Precious]) -> list[str]:
    """The declared paths present on this host, each once, none inside another."""
    paths = sorted({p.rstrip("/") or "/" for d in declarations for p in d.paths})
    present = [p for p in paths if os.path.lexists(p)]
    return [p for p in present if not any(p != q and p.startswith(q.rstrip("/") + "/")
                                          for q in present)]  # fmt: skip


# --- borg ---------------------------------------------------------------------------------


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


# --- hooks --------------------------------------------------------------------------------


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


# --- the drill ----------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Comparison:
    checked: int = 0
    changed_since: int = 0  # the source changed after the snapshot: not comparable
    mismatches: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.missing


def compare_restored(
    restored_root: Path, snapshot_time: float, paths: Iterable[str], source_root: Path = Path("/")
) -> Comparison:
    """Compare every regular file restored under ``restored_root`` with the source file of
    the same path. A source file modified at or after the snapshot's start is not held
    against the snapshot; one older than it must have the same checksum. A declared path
    older than the snapshot must be in it."""
    result = Comparison()
    for top in paths:
        source_top = source_root / top.lstrip("/")
        restored_top = restored_root / top.lstrip("/")
        if not restored_top.exists() and not restored_top.is_symlink():
            if source_top.exists() and source_top.lstat().st_ctime < snapshot_time:
                result.missing.append(top)
            continue
        for restored in _regular_files(restored_top):
            source = source_root / restored.relative_to(restored_root)
            try:
                info = source.lstat()
            except FileNotFoundError:
                result.changed_since += 1  # removed since: nothing to compare with
                continue
            if not stat.S_ISREG(info.st_mode) or max(info.st_mtime, info.st_ctime) >= snapshot_time:
                result.changed_since += 1
                continue
            result.checked += 1
            if sha256_file(source) != sha256_file(restored):
                result.mismatches.append("/" + str(restored.relative_to(restored_root)))
    return result


def _regular_files(top: Path) -> Iterable[Path]:
    if top.is_file() and not top.is_symlink():
        yield top
        return
    for root, _dirs, files in os.walk(top):
        for name in sorted(files):
            path = Path(root, name)
            if path.is_file() and not path.is_symlink():
                yield path


def drill(cfg: Config, repo: Repository) -> dict[str, Any]:
    """Restore the latest snapshot to scratch, compare it with the source, check the
    repository with borg's own check. Returns the drill's record."""
    started = time.time()
    record: dict[str, Any] = {"time": started, "repository": repo.name, "ok": False}
    try:
        archive = latest_archive(cfg, repo)
        record["archive"] = archive["name"]
        scratch_parent = Path(cfg.state_dir) / "drill"
        scratch_parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch_parent) as scratch:
            borg_ok(cfg, repo, ["extract", f"::{archive['name']}"], cwd=scratch, warnings_ok=False)
            paths = existing_paths(read_declarations(cfg.manifest_dir, cfg.sources))
            compared = compare_restored(Path(scratch), archive_time(archive), paths)
        record.update(checked=compared.checked, changed_since=compared.changed_since)
        if not compared.ok:
            problems = [f"differs: {p}" for p in compared.mismatches[:5]]
            problems += [f"not in the snapshot: {p}" for p in compared.missing[:5]]
            raise BackupError("restored files do not match the source: " + "; ".join(problems))
        check = ["check", "--last", "1", "--glob-archives", cfg.prefix + "*"]
        borg_ok(cfg, repo, check, warnings_ok=False)
        record.update(ok=True, message=f"restored and compared {compared.checked} files")
    except BackupError as exc:
        record["message"] = str(exc)
    record["seconds"] = round(time.time() - started, 3)
    return record


# --- run ----------------------------------------------------------------------------------


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


# --- status -------------------------------------------------------------------------------

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


# --- init ---------------------------------------------------------------------------------


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


# --- restore ------------------------------------------------------------------------------


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
            ["cp", "-a", "--", str(restored), str(target)], capture_output=True, text=True
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


# --- command line -------------------------------------------------------------------------


def pick_repository(cfg: Config, name: str | None) -> Repository:
    for repo in cfg.repositories:
        if name in (None, repo.name):
            return repo
    raise BackupError(
        f"no repository {name!r} (have {', '.join(r.name for r in cfg.repositories)})"
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="cluster-plan-backup", description=__doc__.split("\n")[0])
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
