"""Writing a file a user named as output (an HTML page, an SVG picture, a report), safely.

A command replaces only a file it wrote itself: an existing file must be recognised as this
command's output (a generator mark in its opening, or a report's own fields), else it is left
as it is and the command stops before doing anything else. A symbolic link, a FIFO or a device
at the path is refused, never written through. The text goes to a temporary file beside the
target and replaces it in one rename, so a reader never sees half a page and a failed write
leaves the old file whole. Folders of many files (`monitoring render`, `k8s render`) are
written by cluster_plan.views.rendered on the same rules.

JSON is written with `allow_nan=False`: NaN and Infinity are not JSON, and a reader that
accepts them would judge nothing right with them.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_plan.plan.input_files import (
    InputError,
    non_finite_problem,
    open_regular,
    read_json,
)

MARK_WINDOW = 8192  # the opening of a file looked at for a generator mark
MAX_RECOGNISED_JSON = 256 * 1024 * 1024  # a report of a large cluster's every pair

# Whether an existing regular file is this command's earlier output.
Recogniser = Callable[[Path], bool]


class OutputError(Exception):
    """A file or folder a command was told to write that it will not write; ``str()`` is
    ``path: problem``. The CLI maps it to exit 2 (the path given is not one to write)."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def html_mark(kind: str) -> str:
    """The generator mark a page of `kind` carries in its <head>."""
    return f'<meta name="generator" content="cluster-plan {kind}">'


def svg_mark(kind: str) -> str:
    return f"<!-- generator: cluster-plan {kind} -->"


def marked(*signatures: str) -> Recogniser:
    """A file whose opening holds one of the signatures (the generator mark, and the opening
    an earlier version wrote without one)."""

    def recognise(path: Path) -> bool:
        with contextlib.suppress(InputError, OSError), open_regular(path, follow=False) as file:
            head = file.read(MARK_WINDOW)
            return any(s.encode() in head for s in signatures)
        return False

    return recognise


def json_document(test: Callable[[Any], bool]) -> Recogniser:
    """A JSON document that passes `test` (a report says what it is in its own fields)."""

    def recognise(path: Path) -> bool:
        with contextlib.suppress(InputError):
            return test(read_json(path, MAX_RECOGNISED_JSON, follow=False))
        return False

    return recognise


def _kind(mode: int) -> str | None:
    """What a path that is no regular file is, in words; None for a regular file."""
    for test, words in (
        (stat.S_ISLNK, "a symbolic link (cluster-plan does not write through one)"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return words
    return None


def existing(path: Path) -> os.stat_result | None:
    """The path's own status (a link not followed); None when nothing is there."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputError(path, f"cannot look at it: {exc.strerror or exc}") from None


def check_output(path: Path, own: Recogniser, command: str) -> None:
    """OutputError unless `path` is free or holds an earlier output of `command`; call it
    before the work that the file reports, so a refusal costs nothing."""
    found = existing(path)
    if found is None:
        return
    kind = _kind(found.st_mode)
    if kind is not None:
        raise OutputError(path, f"this is {kind}, not a file `{command}` wrote; left as it is")
    if not own(path):
        raise OutputError(
            path,
            f"a file that `cluster-plan {command}` did not write; left as it is (remove it or "
            "choose another path)",
        )


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Replace `path` with `text` through a temporary file beside it and one rename; the new
    file keeps the old one's permissions, else gets what the umask gives. A link swapped in
    at `path` meanwhile is replaced, not followed."""
    found = existing(path)
    if mode is None:
        mode = stat.S_IMODE(found.st_mode) if found is not None else _umask_mode()
    try:
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
        )
    except OSError as exc:  # name the file asked for, not the temporary
        raise OutputError(path, f"cannot write it: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _umask_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_output(path: Path, text: str, own: Recogniser, command: str) -> None:
    """check_output, then write_atomic."""
    check_output(path, own, command)
    write_atomic(path, text)


def finite_json(data: Any, what: str, **options: Any) -> str:
    """json.dumps with allow_nan=False; a NaN or Infinity in the data is an OutputError that
    says where, never a bare NaN in the file."""
    try:
        return json.dumps(data, allow_nan=False, **options)
    except ValueError:
        problem = non_finite_problem(data)
        if problem is None:
            raise
        raise OutputError(what, f"cannot be written as JSON: {problem}") from None
