"""What a change has done so far, kept beside the plan so that a second run (after a failure,
an interrupt or a lost terminal) continues at the first step not done.

One file per change: named by a digest of both plans and the operator's choices, so that
another change (the plan edited again) starts its own record instead of skipping steps it
never ran; closed (renamed `.done.json`) when the change was carried out to the end. A step
is marked done only after it succeeded; a step that was running when the run stopped runs
again, which every step allows (each is idempotent).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class JournalError(Exception):
    """The record cannot be read, or another run of the same change holds it."""


def digest(identity: Any) -> str:
    """What names a change: both expanded plans and the operator's choices that change the
    operations (not --force or the timeouts, so that a run continued with them resumes)."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Journal:
    def __init__(self, folder: Path, identity: Any) -> None:
        self.digest = digest(identity)
        self.path = folder / f"change-{self.digest}.json"
        self.finished_path = folder / f"change-{self.digest}.done.json"
        self._data: dict[str, Any] = {"digest": self.digest, "done": {}, "failed": None}
        if self.path.exists():
            try:
                loaded = json.loads(self.path.read_text())
            except (OSError, ValueError) as exc:
                raise JournalError(
                    f"{self.path}: not a readable change record ({exc}); move it away to "
                    "start this change from its first step"
                ) from None
            if isinstance(loaded, dict) and loaded.get("digest") == self.digest:
                self._data = loaded

    @contextmanager
    def held(self) -> Iterator[None]:
        """One run of a change at a time (a second one would run the same steps)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalError(
                    f"another run of this change holds {self.path.with_suffix('.lock')}"
                ) from None
            yield

    def finished_at(self) -> float | None:
        """When this change was carried out to the end (its record closed), if it was."""
        try:
            return float(json.loads(self.finished_path.read_text())["finished"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def finish(self) -> None:
        self._data["finished"] = time.time()
        self._save()
        os.replace(self.path, self.finished_path)

    @staticmethod
    def step_id(number: int, key: str) -> str:
        return f"{number}/{key}"

    def done(self, step_id: str) -> bool:
        return step_id in self._data["done"]

    @property
    def started(self) -> bool:
        return bool(self._data["done"]) or self._data["failed"] is not None

    @property
    def failed(self) -> dict[str, Any] | None:
        failed: dict[str, Any] | None = self._data["failed"]
        return failed

    def mark_done(self, step_id: str, seconds: float) -> None:
        self._data["done"][step_id] = {"at": time.time(), "seconds": round(seconds, 1)}
        self._data["failed"] = None
        self._save()

    def mark_failed(self, step_id: str, message: str) -> None:
        self._data["failed"] = {"step": step_id, "at": time.time(), "message": message}
        self._save()

    def seconds(self) -> dict[str, float]:
        return {k: float(v["seconds"]) for k, v in self._data["done"].items()}

    def _save(self) -> None:
        # written whole and renamed: an interrupted write never leaves half a record
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._data, indent=2, sort_keys=True))
        os.replace(tmp, self.path)
