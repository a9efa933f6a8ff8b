"""Reading a file a user named as input (a plan, a lock, a report, sacct output), safely.

Only regular files are read: a FIFO would block the reader for ever, /dev/zero never ends, a
directory or a socket is no file at all. The file is looked at before it is opened, opened
without blocking, and looked at again through the open descriptor (it may have been swapped
in between); at most a limit of bytes is read. JSON is parsed with every way it can fail
(too deep for the parser, a number too long for Python's int, NaN or Infinity, which Python
reads and JSON does not have) turned into one message.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

MAX_JSON_DEPTH = 64  # locks and reports are a few levels deep; anything near this is junk

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputError(ValueError):
    """A file that cannot be read as input; ``str()`` is ``file: problem``."""

    def __init__(self, path: str | Path, problem: str, code: str = "unreadable") -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem
        self.code = code  # a finding code of cluster_plan.cli.policy.INPUT_CODES
        self.line: int | None = None
        self.column: int | None = None


def _special(mode: int) -> str | None:
    """What a file that is not a regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _refuse_special(path: str | Path, mode: int) -> None:
    kind = _special(mode)
    if kind is not None:
        raise InputError(path, f"this is {kind}, not a regular file", "not-a-file")


@contextmanager
def open_regular(path: str | Path) -> Iterator[IO[bytes]]:
    """The file opened for reading in binary, or InputError; never blocks on a FIFO."""
    try:
        _refuse_special(path, os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(path, "no such file", "file-not-found") from None
    except OSError as exc:
        raise InputError(path, f"cannot read the file: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        _refuse_special(path, os.fstat(fd).st_mode)  # swapped since the first look
        yield handle


def read_bytes(path: str | Path, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file; InputError when it holds more."""
    with open_regular(path) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise InputError(path, f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(path, f"the file is larger than {limit} bytes", "too-large")
    return data


def read_text(path: str | Path, limit: int) -> str:
    """A regular file's UTF-8 text; InputError for binary data."""
    return decode_text(read_bytes(path, limit), path)


def decode_text(data: bytes, path: str | Path, expected: str = "text") -> str:
    """UTF-8 text (a BOM dropped); InputError (code not-text) for NUL bytes or other bytes
    that are not UTF-8. ``expected`` names what the file should have held."""
    if b"\x00" in data:
        raise InputError(
            path, f"the file holds binary data (NUL bytes), not {expected}", "not-text"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            path, f"the file is not UTF-8 text ({exc.reason} at byte {exc.start})", "not-text"
        ) from None


def _depth(data: Any) -> int:
    """How deeply lists and objects nest (iterative: the data may be deep)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_JSON_DEPTH:
                stack.extend((child, level + 1) for child in children)
    return deepest


class _NonFinite(Exception):
    """NaN, Infinity or -Infinity: Python's json reads them, JSON (RFC 8259) has none."""


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def parse_json(text: str, path: str | Path, what: str = "JSON") -> Any:
    """JSON text -> data; InputError (with the line and column where known) otherwise."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except _NonFinite as exc:
        raise InputError(
            path, f"not {what}: it holds {exc}, a number JSON does not have (numbers are finite)"
        ) from None
    except json.JSONDecodeError as exc:
        error = InputError(path, f"not {what}: {exc.msg} (line {exc.lineno} column {exc.colno})")
        error.line, error.column = exc.lineno, exc.colno
        raise error from None
    except RecursionError:
        raise InputError(path, f"not {what}: it nests too deeply to read") from None
    except ValueError as exc:  # a number longer than Python converts (int_max_str_digits)
        reason = str(exc).split(";")[0]
        raise InputError(path, f"not {what}: a number in it is too long ({reason})") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise InputError(path, f"not {what}: it nests deeper than {MAX_JSON_DEPTH} levels")
    return data


def read_json(path: str | Path, limit: int, what: str = "JSON") -> Any:
    """A regular file's JSON; InputError says why there is none."""
    return parse_json(read_text(path, limit), path, what)
