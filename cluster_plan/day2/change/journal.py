"""What a change has done so far, kept beside the plan so that a second run (after a failure,
an interrupt or a lost terminal) continues at the first step not done.

One file per change: named by a digest of the operations, so that another change (the plan
edited again) starts its own record instead of skipping steps it never ran. A step is marked
done only after it succeeded; a step that was running when the run stopped runs again, which
every step allows (each is idempotent).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from cluster_plan.day2.change.operations import Operation


def digest(ops: list[Operation]) -> str:
    text = json.dumps([op.as_dict() for op in ops], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Journal:
    def __init__(self, folder: Path, ops: list[Operation]) -> None:
        self.digest = digest(ops)
        self.path = folder / f"change-{self.digest}.json"
        self._data: dict[str, Any] = {"digest": self.digest, "done": {}, "failed": None}
        if self.path.exists():
            loaded = json.loads(self.path.read_text())
            if loaded.get("digest") == self.digest:
                self._data = loaded

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
