"""The project's own state as metrics: the last acceptance run (from the acceptance history),
each node's backups (`cluster-plan backup status --format json`) and the drift found (`cluster-plan
drift --format json`); of those two, the `result` of their JSON envelope.

Each source is optional: a metric whose source was not given, or whose saved file is not there
yet, is left out. The backup and drift
documents are read from a file an earlier run saved, or made by running the command now.
A saved file must be a regular file (a FIFO would hang the timer's run, a link is not
followed), and a document of another shape, or with a number that is not finite, is a
collector error naming the file and the key: no metric is made from it.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import Metric

from cluster_plan.acceptance.history import History, HistoryError
from cluster_plan.cli.envelope import EnvelopeError, unwrapped
from cluster_plan.exporters.slurm import Runner, run_command
from cluster_plan.exporters.textfile import CollectorError, family
from cluster_plan.monitoring import metrics
from cluster_plan.plan.input_files import InputError, parse_json, read_text

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # drift or backup status of a large cluster


@dataclass(frozen=True)
class Document:
    """A command's JSON document, when it was taken (its ages count back from then) and where
    it came from (a file, or the command run now), for messages."""

    data: dict[str, Any]
    taken_at: float
    source: str = "the document"


def last_acceptance(history: Path, cluster: str) -> tuple[float, bool] | None:
    """(when the last run was generated, whether it passed); None when nothing was recorded."""
    if not os.path.lexists(history):
        return None
    try:
        with History(history) as store:
            runs = store.runs(cluster, limit=1)
    except HistoryError as exc:
        raise CollectorError(str(exc)) from None
    if not runs:
        return None
    when = dt.datetime.fromisoformat(runs[0].generated_at)  # checked when the row was read
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp(), runs[0].passed


def _parse(text: str, what: str) -> dict[str, Any]:
    try:
        data = parse_json(text, what)
    except InputError as exc:  # not JSON, too deep, a NaN: the message names the key
        raise CollectorError(str(exc)) from None
    if not isinstance(data, dict):
        raise CollectorError(f"{what}: not a JSON object")
    return data


def command_result(data: dict[str, Any], what: str, command: str) -> dict[str, Any]:
    """The result out of the command's JSON envelope, once the envelope says the command
    finished (ok, or failed with findings); a bare document, as saved by a version before the
    envelope, is the result itself."""
    try:
        result = unwrapped(data, command)
    except EnvelopeError as exc:
        raise CollectorError(f"{what}: {exc}") from None
    if not isinstance(result, dict):
        raise CollectorError(f"{what}: the result is not a JSON object")
    return result


def read_document(path: Path, command: str) -> Document:
    """A document saved by an earlier run of `command`; taken when the file was written."""
    try:
        text = read_text(path, MAX_DOCUMENT_BYTES, follow=False)
        taken = os.lstat(path).st_mtime
    except InputError as exc:  # a FIFO, a link, a directory, binary data
        raise CollectorError(str(exc)) from None
    except OSError as exc:
        raise CollectorError(f"{path}: cannot read: {exc.strerror}") from None
    data = command_result(_parse(text, str(path)), str(path), command)
    return Document(data, taken, str(path))


COMMAND_TIMEOUT_S = 600.0  # drift and backup status reach every node over SSH


def run_document(plan: Path, command: list[str], run: Runner | None = None) -> Document:
    """Run `cluster-plan COMMAND PLAN --format json` (exit 1 with findings still gives JSON)."""
    argv = [sys.executable, "-m", "cluster_plan", *command, str(plan), "--format", "json"]
    if run is None:
        code, out, err = run_command(argv, COMMAND_TIMEOUT_S)
    else:
        code, out, err = run(argv)
    what = f"cluster-plan {' '.join(command)}"
    if code not in (0, 1) or not out.strip():
        raise CollectorError(f"{what}: exit {code}: {err.strip()}")
    data = command_result(_parse(out, what), what, " ".join(command))
    return Document(data, time.time(), what)


def backup_rows(document: Document) -> dict[str, tuple[float, bool | None]]:
    """{host: (oldest last-snapshot time over its repositories, last drill passed)}.

    A repository without any snapshot counts as time 0, so a node never backed up looks
    overdue; a node with no drill yet has None (its drill metric is left out)."""
    hosts: dict[str, tuple[float, bool | None]] = {}
    rows = document.data.get("hosts", [])
    if not isinstance(rows, list):
        raise CollectorError(f"{document.source}: $.hosts is not a list of rows")
    for index, row in enumerate(rows):
        host, age, drill = _backup_row(row, f"{document.source}: $.hosts[{index}]")
        taken = 0.0 if age is None else document.taken_at - age
        oldest, seen_drill = hosts.get(host, (taken, None))
        hosts[host] = (min(oldest, taken), drill if drill is not None else seen_drill)
    return hosts


def _backup_row(row: Any, where: str) -> tuple[str, float | None, bool | None]:
    """(host, age_s, drill_ok) of one row, each of its type; CollectorError names the key."""
    if not isinstance(row, dict):
        raise CollectorError(f"{where} is not a row (a JSON object)")
    host, age, drill = row.get("host"), row.get("age_s"), row.get("drill_ok")
    if not isinstance(host, str) or not host:
        raise CollectorError(f"{where}.host is not a host name: {host!r}")
    if age is not None and (
        isinstance(age, bool) or not isinstance(age, int | float) or not math.isfinite(age)
    ):
        raise CollectorError(f"{where}.age_s is not a number of seconds: {age!r}")
    if drill is not None and not isinstance(drill, bool):
        raise CollectorError(f"{where}.drill_ok is not true, false or null: {drill!r}")
    return host, None if age is None else float(age), drill


def drift_findings(document: Document) -> int:
    """How many findings the drift document holds."""
    findings = document.data.get("findings", [])
    if not isinstance(findings, list):
        raise CollectorError(f"{document.source}: $.findings is not a list")
    return len(findings)


def state_families(
    acceptance: tuple[float, bool] | None,
    backups: dict[str, tuple[float, bool | None]] | None,
    drift: Document | None,
) -> Iterator[Metric]:
    """The cluster_plan_acceptance_*, _backup_* and _drift_* families (pure)."""
    if acceptance is not None:
        when = family(metrics.ACCEPTANCE_LAST_RUN)
        when.add_metric([], acceptance[0])
        passed = family(metrics.ACCEPTANCE_PASSED)
        passed.add_metric([], 1 if acceptance[1] else 0)
        yield from (when, passed)
    if backups is not None:
        last = family(metrics.BACKUP_LAST_SUCCESS)
        drill = family(metrics.BACKUP_DRILL_PASSED)
        for host, (taken, drill_ok) in sorted(backups.items()):
            last.add_metric([host], taken)
            if drill_ok is not None:
                drill.add_metric([host], 1 if drill_ok else 0)
        yield from (last, drill)
    if drift is not None:
        findings = family(metrics.DRIFT_FINDINGS)
        findings.add_metric([], drift_findings(drift))
        yield findings


def _document(saved: Path | None, plan: Path | None, command: list[str]) -> Document | None:
    """The saved document; None when it was not delivered yet (the monitoring role copies the
    controller's when it has one), like an acceptance history with no run."""
    if saved is not None:
        present = os.path.lexists(saved)  # a link is there, and refused: not "not yet"
        return read_document(saved, " ".join(command)) if present else None
    return run_document(plan, command) if plan is not None else None


def collect_state(
    history: Path | None,
    cluster: str | None,
    backup_status: Path | None,
    drift: Path | None,
    plan: Path | None,
) -> list[Metric]:
    """Read each given source and build the families."""
    acceptance = last_acceptance(history, cluster) if history and cluster else None
    backup = _document(backup_status, plan, ["backup", "status"])
    return list(
        state_families(
            acceptance,
            None if backup is None else backup_rows(backup),
            _document(drift, plan, ["drift"]),
        )
    )
