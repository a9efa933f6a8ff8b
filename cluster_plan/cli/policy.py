"""The command line's one policy: what each exit status means, and which error maps to which.

Subcommands return what they found or raise; `run` turns that into an exit status. Every
subcommand of `cluster-plan` (lab, acceptance and report included) goes through here, so the
same broken input gives the same status whatever the command.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from cluster_plan.output_files import OutputError
from cluster_plan.plan.findings import Finding, PlanError, errors
from cluster_plan.plan.input_files import InputError


class Exit(enum.IntEnum):
    OK = 0
    FAILED = 1  # the plan, or the cluster, fails a check; every finding is printed
    USAGE = 2  # a usage error, or input that cannot be read at all
    REFUSED = 3  # a destructive change that needs its confirming flag (--allow-destructive)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)


# Findings that mean "there is no plan to check" rather than "the plan fails a check".
INPUT_CODES = frozenset(
    {
        "file-not-found",
        "not-a-file",
        "unreadable",
        "not-text",
        "plan-too-large",
        "too-large",
        "lock-unreadable",
        "lock-too-new",
    }
)


class CommandError(Exception):
    """A failure a subcommand reports in words; ``exit`` says which kind it is."""

    exit: Exit = Exit.FAILED

    def __init__(self, message: str, *, exit: Exit | None = None) -> None:
        super().__init__(message)
        if exit is not None:
            self.exit = exit


class UsageError(CommandError):
    """Wrong arguments, or an input file that cannot be read."""

    exit = Exit.USAGE


class CheckFailed(CommandError):
    """The plan or the cluster fails a check."""

    exit = Exit.FAILED


class Refused(CommandError):
    """The command would do something destructive that the user did not confirm."""

    exit = Exit.REFUSED


def exit_for(findings: Iterable[Finding]) -> Exit:
    """OK without errors; USAGE when every error says the input could not be read at all."""
    errs = errors(findings)
    if not errs:
        return Exit.OK
    return Exit.USAGE if all(f.code in INPUT_CODES for f in errs) else Exit.FAILED


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def run(handler: Callable[[Any], int | Exit | None], args: Any) -> int:
    """Call a subcommand's handler, map what it raises to an exit status, and let the
    reporter finish (under --format json it writes the one document now)."""
    code = _outcome(handler, args)
    reporter = getattr(args, "reporter", None)
    if reporter is not None:
        try:
            code = reporter.finish(code)
        except BrokenPipeError:
            return _reader_gone()
    return code


def _outcome(handler: Callable[[Any], int | Exit | None], args: Any) -> int:
    reporter = getattr(args, "reporter", None)
    try:
        code = handler(args)
        return int(Exit.OK if code is None else code)
    except PlanError as exc:
        if reporter is not None:
            reporter.plan_error(exc)
        else:
            _stderr(exc.render())
        return int(exit_for(exc.findings))
    except CommandError as exc:
        return _failed(args, str(exc), exc.exit)
    except InputError as exc:  # a file named as input is not one (a FIFO, junk, too deep)
        return _failed(args, str(exc), Exit.USAGE, exc.path)
    except OutputError as exc:  # a path to write that holds what the command did not write
        return _failed(args, str(exc), Exit.USAGE, exc.path)
    except KeyboardInterrupt:
        return _failed(args, "interrupted", Exit.INTERRUPTED, line="interrupted")
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:  # a file we were told to write or read: name it, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        file = str(exc.filename) if exc.filename else None
        return _failed(args, f"{where}{exc.strerror or exc}", Exit.USAGE, file)


def _reader_gone() -> int:
    """The reader went away (`| head`): stop quietly, and keep Python from complaining about
    the unflushed pipe at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return int(Exit.OK)


def _failed(
    args: Any, message: str, code: Exit, file: str | None = None, line: str | None = None
) -> int:
    """An error instead of findings: one line for people; under --format json, also the
    document's `error` (the reporter writes it, so no command can leave stdout empty)."""
    line = line or f"{_prog(args)}: error: {message}"
    reporter = getattr(args, "reporter", None)
    if reporter is None:
        _stderr(line)
    else:
        reporter.error(line, {"message": message, "file": file})
    return int(code)


def _prog(args: Any) -> str:
    command = getattr(args, "command", None)
    return f"cluster-plan {command}" if command else "cluster-plan"
