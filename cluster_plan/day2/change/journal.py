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
import math
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cluster_plan.plan.input_files import InputError, read_text

RECORD_LIMIT = 16 << 20  # a record names each step once: megabytes are no record


class JournalError(Exception):
    """The record cannot be read, or another run of the same change holds it."""


def digest(identity: Any) -> str:
    """What names a change: both expanded plans and the operator's choices that change the
    operations (not --force or the timeouts, so that a run continued with them resumes)."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number this record holds")


def _read(path: Path) -> Any:
    """The JSON of a record this command wrote: a regular file, never a link followed (it
    could lead anywhere) nor a FIFO opened (a read would wait for ever)."""
    where = f"{path}: "
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise JournalError(f"{where}a symbolic link, not a change record: refused")
        text = read_text(path, RECORD_LIMIT)
        return json.loads(text, parse_constant=_no_constant)
    except InputError as exc:
        raise JournalError(f"{exc}; move it away to start this change anew") from None
    except ValueError as exc:  # not JSON, NaN or Infinity
        raise JournalError(
            f"{where}not a readable change record ({exc}); move it away to start this change "
            "from its first step"
        ) from None


def write_whole(path: Path, text: str) -> None:
    """`text` into a new file of its own, renamed to `path`: an interrupted write never
    leaves half a file, and nothing in its place (a link) is written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_small(path: Path) -> str:
    """A small file this command wrote beside its record (a link or a FIFO refused)."""
    if stat.S_ISLNK(os.lstat(path).st_mode):
        raise JournalError(f"{path}: a symbolic link, not a file this command wrote: refused")
    try:
        return read_text(path, 4096)
    except InputError as exc:
        raise JournalError(str(exc)) from None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _shape_problem(data: Any, expected: str) -> str | None:
    """What makes `data` no record of the change `expected` names, or None."""
    if not isinstance(data, dict):
        return "not a change record (a JSON object)"
    if data.get("digest") != expected:
        return f"the record of another change (digest {data.get('digest')!r}, not {expected})"
    done = data.get("done")
    if not isinstance(done, dict):
        return "`done` is not an object of steps"
    for step, entry in done.items():
        if not (isinstance(entry, dict) and _number(entry.get("at"))):
            return f"done step {step!r} has no time `at`"
        if not _number(entry.get("seconds")):
            return f"done step {step!r}: `seconds` is not a number"
    failed = data.get("failed")
    if failed is not None and not isinstance(failed, dict):
        return "`failed` is neither null nor an object"
    if failed is not None and not (
        isinstance(failed.get("step"), str) and isinstance(failed.get("message"), str)
    ):
        return "`failed` lacks its `step` or `message`"
    if "finished" in data and not _number(data["finished"]):
        return "`finished` is not a time"
    return None


class Journal:
    def __init__(self, folder: Path, identity: Any) -> None:
        self.digest = digest(identity)
        self.path = folder / f"change-{self.digest}.json"
        self.finished_path = folder / f"change-{self.digest}.done.json"
        self._data: dict[str, Any] = {"digest": self.digest, "done": {}, "failed": None}
        if os.path.lexists(self.path):
            loaded = _read(self.path)
            problem = _shape_problem(loaded, self.digest)
            if problem:
                raise JournalError(
                    f"{self.path}: {problem}; move it away to start this change from its first step"
                )
            self._data = loaded

    @contextmanager
    def held(self) -> Iterator[None]:
        """One run of a change at a time (a second one would run the same steps). The lock
        file is opened as it is, never through a link and never truncated."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_suffix(".lock")
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(lock, flags, 0o644)
        except OSError as exc:
            if os.path.islink(lock):
                raise JournalError(f"{lock}: a symbolic link, not a lock file: refused") from None
            raise JournalError(f"{lock}: cannot open the lock: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise JournalError(f"{lock}: not a regular file: refused as the lock")
        with os.fdopen(fd, "rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalError(f"another run of this change holds {lock}") from None
            yield

    def finished_at(self) -> float | None:
        """When this change was carried out to the end (its record closed), if it was; a
        closed record that cannot be read is an error, not a change never carried out."""
        if not os.path.lexists(self.finished_path):
            return None
        data = _read(self.finished_path)
        if not isinstance(data, dict) or not _number(data.get("finished")):
            raise JournalError(
                f"{self.finished_path}: not a closed change record (no time `finished`); move "
                "it away to run this change again"
            )
        return float(data["finished"])

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
        write_whole(self.path, json.dumps(self._data, indent=2, sort_keys=True, allow_nan=False))
