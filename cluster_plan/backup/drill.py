"""The restore drill: the latest snapshot restored to scratch, every restored file compared
with its source by checksum, then borg's own check of the repository.

Node side: standard library only.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.backup.borg import archive_time, borg_ok, latest_archive
from cluster_plan.backup.settings import (
    BackupError,
    Config,
    Repository,
    existing_paths,
    read_declarations,
)


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
            try:
                digest = sha256_file(source)
                after = source.lstat()
            except FileNotFoundError:  # rotated away while it was read (slurmctld's state)
                result.changed_since += 1
                continue
            if _identity(after) != _identity(info):  # replaced or written while it was read
                result.changed_since += 1
                continue
            result.checked += 1
            if digest != sha256_file(restored):
                result.mismatches.append("/" + str(restored.relative_to(restored_root)))
    return result


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


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
