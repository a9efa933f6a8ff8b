"""A node's backup settings (/etc/cluster-plan/backup.json, written by the backup role) and
what it backs up: the precious state each role declares in its manifest, then the plan's
sources.

Node side: standard library only (the nodes run it with the distribution's python3).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CONFIG = Path("/etc/cluster-plan/backup.json")


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
