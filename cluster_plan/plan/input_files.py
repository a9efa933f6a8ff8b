"""Reading a file a user named as input (a plan, a lock, a report, sacct output), safely.

Only regular files are read: a FIFO would block the reader for ever, /dev/zero never ends, a
directory or a socket is no file at all. The file is looked at before it is opened, opened
without blocking, and looked at again through the open descriptor (it may have been swapped
in between); at most a limit of bytes is read. A reader that runs unattended (an exporter
under a timer, the acceptance history) also refuses a symbolic link (`follow=False`): it is
not led to read another file than the one it was given. JSON is parsed with every way it can
fail (too deep for the parser, a number too long for Python's int, NaN or Infinity, which JSON
does not have and which would pass every comparison) turned into one message.
"""

from __future__ import annotations

import errno
import json
import math
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


SYMLINK_PROBLEM = "this is a symbolic link; give the file it points to"


@contextmanager
def open_regular(path: str | Path, follow: bool = True) -> Iterator[IO[bytes]]:
    """The file opened for reading in binary, or InputError; never blocks on a FIFO. With
    follow=False a symbolic link is refused too (O_NOFOLLOW: also when one is swapped in)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
        if stat.S_ISLNK(mode):
            raise InputError(path, SYMLINK_PROBLEM, "not-a-file")
        _refuse_special(path, mode)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(path, "no such file", "file-not-found") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise InputError(path, SYMLINK_PROBLEM, "not-a-file") from None
        raise InputError(path, f"cannot read the file: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        _refuse_special(path, os.fstat(fd).st_mode)  # swapped since the first look
        yield handle


def read_bytes(path: str | Path, limit: int, follow: bool = True) -> bytes:
    """At most ``limit`` bytes of a regular file; InputError when it holds more."""
    with open_regular(path, follow) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise InputError(path, f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(path, f"the file is larger than {limit} bytes", "too-large")
    return data


def read_text(path: str | Path, limit: int, follow: bool = True) -> str:
    """A regular file's UTF-8 text; InputError for binary data."""
    return decode_text(read_bytes(path, limit, follow), path)


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


class NonFinite(float):
    """A number JSON has no word for (NaN, Infinity, or a literal too large for a float), kept
    as parsed so that the check after loading can say where it stood."""

    def __new__(cls, literal: str) -> NonFinite:
        number = super().__new__(cls, "nan")
        number.literal = literal
        return number

    literal: str


class _Numbers:
    """json.loads' hooks for numbers: what it parses, noting whether any was not finite (only
    then is the data walked to say where)."""

    def __init__(self) -> None:
        self.non_finite = False

    def constant(self, literal: str) -> float:
        self.non_finite = True
        return NonFinite(literal)

    def floating(self, literal: str) -> float:
        number = float(literal)
        if math.isfinite(number):
            return number
        return self.constant(literal)


def first_non_finite(data: Any) -> tuple[str, float] | None:
    """(the JSON path, as $.a[0].b, and the number) of the first number that is NaN or
    infinite; None when every number is finite. Iterative: the data may be deep."""
    stack: list[tuple[Any, str]] = [(data, "$")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return where, value
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}") for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
    return None


def non_finite_problem(data: Any) -> str | None:
    """Where the data holds a number that is not finite, in words; None when it holds none."""
    found = first_non_finite(data)
    if found is None:
        return None
    where, value = found
    literal = value.literal if isinstance(value, NonFinite) else repr(value)
    return f"{where} is {literal}: a number must be finite (JSON has no NaN or Infinity)"


def parse_json(text: str, path: str | Path, what: str = "JSON") -> Any:
    """JSON text -> data; InputError (with the line and column where known) otherwise."""
    numbers = _Numbers()
    try:
        data = json.loads(text, parse_constant=numbers.constant, parse_float=numbers.floating)
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
    problem = non_finite_problem(data) if numbers.non_finite else None
    if problem is not None:
        raise InputError(path, f"not {what}: {problem}")
    return data


def read_json(path: str | Path, limit: int, what: str = "JSON", follow: bool = True) -> Any:
    """A regular file's JSON; InputError says why there is none."""
    return parse_json(read_text(path, limit, follow), path, what)
