"""The acceptance history: every run of `cluster-plan acceptance`, its verdict and every figure,
in one SQLite database (by default reports/<cluster>/history.sqlite, beside the reports).

Two runs may record at once (two clusters sharing a database, or an operator's run during a
site.yml): every write is one `BEGIN IMMEDIATE` transaction and a connection waits up to
BUSY_TIMEOUT_S for the other's. The file says what it is (PRAGMA application_id, and
user_version for the layout): a file that is not SQLite, or a SQLite database of something
else, is an error that names the file, never recreated or written over; a missing file is
created by a measuring run as it starts (so a foreign file is refused before anything is
measured), never when the history is read. A symbolic link, a FIFO or a device at the path is
refused before SQLite opens it (a FIFO would hang it; a link would lead it elsewhere).

SQLite keeps whatever type a value is given, whatever the column says: every row read is
checked (text where text belongs, a finite number where a figure belongs, criteria that are a
JSON object), so a row another program wrote is an error naming the file, the run and the
column, never a traceback. A NaN or Infinity is never recorded.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_plan.acceptance.figures import Figure, Key, figures_from_report
from cluster_plan.cli.policy import UsageError
from cluster_plan.output_files import OutputError, finite_json
from cluster_plan.plan.input_files import InputError, open_regular, parse_json

APPLICATION_ID = 0x43504148  # "CPAH": cluster-plan acceptance history
LAYOUT = 1  # PRAGMA user_version of the tables below
BUSY_TIMEOUT_S = 60.0
DEFAULT_NAME = "history.sqlite"

_TABLES = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster TEXT NOT NULL,
    generated_at TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    plan_hash TEXT NOT NULL,
    lock_hash TEXT,
    inputs TEXT,
    passed INTEGER NOT NULL,
    faults INTEGER NOT NULL,
    criteria TEXT NOT NULL,
    report_path TEXT,
    baseline INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_cluster ON runs (cluster, id);
CREATE TABLE figures (
    run_id INTEGER NOT NULL REFERENCES runs (id),
    metric TEXT NOT NULL,
    network TEXT NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    value REAL,
    floor REAL,
    PRIMARY KEY (run_id, metric, network, source, target)
);
"""


class HistoryError(UsageError):
    """The history cannot be read or written; the message names the file and says why."""


@dataclass(frozen=True)
class Run:
    id: int
    cluster: str
    generated_at: str
    plan_hash: str
    lock_hash: str | None
    passed: bool
    faults: int
    criteria: dict[str, Any]
    report_path: str | None
    baseline: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.id,
            "cluster": self.cluster,
            "generated_at": self.generated_at,
            "plan_hash": self.plan_hash,
            "lock_hash": self.lock_hash,
            "passed": self.passed,
            "faults": self.faults,
            "baseline": self.baseline,
            "report": self.report_path,
        }


def file_hash(path: Path) -> str | None:
    """SHA-256 of a file, None when there is none (a plan without a lock yet)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _refuse_special(path: Path) -> None:
    """HistoryError for a link, a FIFO, a device or a directory at the path (looked at through
    a descriptor opened without following a link or blocking on a FIFO)."""
    try:
        with open_regular(path, follow=False):
            pass
    except InputError as exc:
        suffix = "; not an acceptance history" if exc.code == "not-a-file" else ""
        raise HistoryError(f"{exc}{suffix}") from None


def _connect(path: Path, create: bool) -> sqlite3.Connection:
    if not os.path.lexists(path):
        if not create:
            raise HistoryError(f"{path}: no acceptance history there (no run was recorded)")
    else:
        _refuse_special(path)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    mode = "rwc" if create else "rw"
    try:
        db = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=BUSY_TIMEOUT_S,
            isolation_level=None,
        )  # fmt: skip
    except sqlite3.Error as exc:
        raise HistoryError(f"{path}: cannot open the acceptance history: {exc}") from exc
    db.row_factory = sqlite3.Row
    return db


def _check_or_create(db: sqlite3.Connection, path: Path, create: bool) -> None:
    """Under the write lock: a new (empty) file gets the tables; anything else must say it is
    an acceptance history of a layout this version reads."""
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    layout = db.execute("PRAGMA user_version").fetchone()[0]
    tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    if app_id == 0 and layout == 0 and tables == 0:
        if not create:
            raise HistoryError(f"{path}: an empty database, no acceptance history in it")
        # statement by statement: executescript() would commit the open transaction first
        for statement in _TABLES.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {LAYOUT}")
        return
    if app_id != APPLICATION_ID:
        raise HistoryError(
            f"{path}: a SQLite database of something else (application_id {app_id:#x}), not a "
            "cluster-plan acceptance history; left as it is (choose another "
            "acceptance.history.database)"
        )
    if layout != LAYOUT:
        raise HistoryError(
            f"{path}: acceptance history layout {layout}, this cluster-plan reads layout "
            f"{LAYOUT}; left as it is"
        )


class History:
    """One open history database; use as a context manager."""

    def __init__(self, path: Path, create: bool = False) -> None:
        self.path = path
        self.db = _connect(path, create)
        try:
            # Only creating needs the write lock: reading a history (a user listing root's
            # runs) must not need write access to it.
            with self._write() if create else nullcontext():
                _check_or_create(self.db, path, create)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise HistoryError(f"{path}: not an acceptance history: {exc}") from exc
        except BaseException:
            self.db.close()
            raise

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction that holds the write lock from its start (waits for another's)."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as exc:
            raise HistoryError(
                f"{self.path}: not an acceptance history, or not writable: {exc}"
            ) from exc
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError):  # a full disk, a lock held too long
                raise HistoryError(
                    f"{self.path}: cannot write the acceptance history: {exc}"
                ) from exc
            raise

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            with closing(self.db.execute(sql, params)) as cursor:
                return list(cursor.fetchall())
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path}: cannot read the acceptance history: {exc}") from exc

    # -- writing -----------------------------------------------------------------------------
    def record(
        self,
        report: Mapping[str, Any],
        plan_hash: str,
        lock_hash: str | None,
        report_path: Path | None = None,
    ) -> int:
        """Append one run and every figure of its report; returns the run's id."""
        faults = sum(1 for f in report["findings"] if f["severity"] == "fault")
        figures = figures_from_report(report)
        self._refuse_non_finite(report, figures)
        row = (
            report["cluster"], report["generated_at"],
            dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), plan_hash, lock_hash,
            report.get("inputs"), int(bool(report["passed"])), faults,
            finite_json(report["criteria"], "criteria", sort_keys=True),
            str(report_path) if report_path else None,
        )  # fmt: skip
        with self._write():
            cursor = self.db.execute(
                "INSERT INTO runs (cluster, generated_at, recorded_at, plan_hash, lock_hash, "
                "inputs, passed, faults, criteria, report_path) VALUES (?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            run_id = int(cursor.lastrowid or 0)
            self.db.executemany(
                "INSERT OR REPLACE INTO figures VALUES (?,?,?,?,?,?,?)",
                [(run_id, *f.key, f.value, f.floor) for f in figures],
            )
        return run_id

    def _refuse_non_finite(self, report: Mapping[str, Any], figures: Sequence[Figure]) -> None:
        """A NaN would be stored as NULL (a failed measurement) and an Infinity would pass
        every floor: neither is recorded."""
        try:
            finite_json(report["criteria"], "the report's criteria")
        except OutputError as exc:
            raise HistoryError(f"{self.path}: not recorded: {exc}") from None
        for figure in figures:
            for name, value in (("value", figure.value), ("floor", figure.floor)):
                if value is not None and not math.isfinite(value):
                    raise HistoryError(
                        f"{self.path}: not recorded: {figure.where()} {figure.metric} {name} is "
                        f"{value}, not a finite number"
                    )

    def mark_baseline(self, run_id: int) -> Run:
        """Make a run its cluster's baseline (the one before it stops being one)."""
        with self._write():
            run = self.run(run_id)
            self.db.execute("UPDATE runs SET baseline = 0 WHERE cluster = ?", (run.cluster,))
            self.db.execute("UPDATE runs SET baseline = 1 WHERE id = ?", (run_id,))
        return self.run(run_id)

    # -- reading -----------------------------------------------------------------------------
    def runs(self, cluster: str, limit: int | None = None) -> list[Run]:
        """A cluster's runs, newest first."""
        rows = self._query(
            "SELECT * FROM runs WHERE cluster = ? ORDER BY id DESC LIMIT ?",
            (cluster, -1 if limit is None else limit),
        )
        return [_run(r, self.path) for r in rows]

    def run(self, run_id: int) -> Run:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise HistoryError(f"{self.path}: no run {run_id} in the acceptance history")
        return _run(rows[0], self.path)

    def resolve(self, selector: str, cluster: str, before: int | None = None) -> Run | None:
        """`baseline`, `last-passed` (the latest passed run before `before`) or a run id;
        None when the history has no such run yet."""
        if selector.isdigit():
            return self._earlier_run(int(selector), cluster, before)
        newer = "" if before is None else f" AND id < {int(before)}"
        if selector == "baseline":
            where = "baseline = 1"
        elif selector == "last-passed":
            where = "passed = 1" + newer
        else:
            raise HistoryError(f"--compare {selector!r}: a run id, last-passed or baseline")
        rows = self._query(
            f"SELECT * FROM runs WHERE cluster = ? AND {where} ORDER BY id DESC LIMIT 1",
            (cluster,),
        )
        return _run(rows[0], self.path) if rows else None

    def _earlier_run(self, run_id: int, cluster: str, before: int | None) -> Run:
        """Run `run_id`, when it is one of this cluster's runs before `before`."""
        run = self.run(run_id)
        if run.cluster != cluster:
            raise HistoryError(
                f"{self.path}: run {run_id} is of cluster {run.cluster}, not {cluster}"
            )
        if before is not None and run_id >= before:
            raise HistoryError(f"{self.path}: run {run_id} is not earlier than run {before}")
        return run

    def figures(self, run_id: int) -> list[Figure]:
        rows = self._query("SELECT * FROM figures WHERE run_id = ?", (run_id,))
        return [_figure(r, self.path) for r in rows]

    def series(
        self, cluster: str, keys: Sequence[Key], upto: int | None, runs: int
    ) -> dict[Key, list[tuple[int, float | None]]]:
        """Each key's value in the cluster's last `runs` runs up to run `upto`, oldest first."""
        bound = "" if upto is None else f" AND id <= {int(upto)}"
        ids = [
            r["id"]
            for r in self._query(
                f"SELECT id FROM runs WHERE cluster = ?{bound} ORDER BY id DESC LIMIT ?",
                (cluster, runs),
            )
        ][::-1]
        out: dict[Key, list[tuple[int, float | None]]] = {k: [] for k in keys}
        for key in keys:
            marks = ",".join("?" * len(ids))
            rows = self._query(
                f"SELECT run_id, value FROM figures WHERE run_id IN ({marks}) AND metric = ? "
                "AND network = ? AND source = ? AND target = ? ORDER BY run_id",
                (*ids, *key),
            )
            where = f"{self.path}: run {{}}: figure {' '.join(key)}"
            out[key] = [
                (r["run_id"], _number(r["value"], where.format(r["run_id"]), "value")) for r in rows
            ]
        return out


def _text(row: sqlite3.Row, column: str, where: str, optional: bool = False) -> Any:
    value = row[column]
    if isinstance(value, str) or (optional and value is None):
        return value
    raise HistoryError(f"{where}: {column} {value!r} is not text")


def _flag(row: sqlite3.Row, column: str, where: str) -> bool:
    value = row[column]
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise HistoryError(f"{where}: {column} {value!r} is not 0 or 1")


def _number(value: Any, where: str, column: str) -> float | None:
    """A figure's value or floor: None (not measured) or a finite number."""
    if value is None or (isinstance(value, int | float) and math.isfinite(value)):
        return value
    raise HistoryError(f"{where}: {column} {value!r} is not a finite number")


def _when(row: sqlite3.Row, where: str) -> str:
    value = _text(row, "generated_at", where)
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        raise HistoryError(f"{where}: generated_at {value!r} is not an ISO 8601 time") from None
    return str(value)


def _criteria(row: sqlite3.Row, where: str) -> dict[str, Any]:
    try:
        criteria = parse_json(_text(row, "criteria", where), where, "criteria (JSON)")
    except InputError as exc:
        raise HistoryError(str(exc)) from None
    if not isinstance(criteria, dict):
        raise HistoryError(f"{where}: criteria is not a JSON object")
    return criteria


def _run(row: sqlite3.Row, path: Path) -> Run:
    """One row of runs, each column of its type; HistoryError names the run and column."""
    where = f"{path}: run {row['id']}"
    faults = row["faults"]
    if not isinstance(faults, int) or faults < 0:
        raise HistoryError(f"{where}: faults {faults!r} is not a count")
    return Run(
        id=row["id"],
        cluster=_text(row, "cluster", where),
        generated_at=_when(row, where),
        plan_hash=_text(row, "plan_hash", where),
        lock_hash=_text(row, "lock_hash", where, optional=True),
        passed=_flag(row, "passed", where),
        faults=faults,
        criteria=_criteria(row, where),
        report_path=_text(row, "report_path", where, optional=True),
        baseline=_flag(row, "baseline", where),
    )


def _figure(row: sqlite3.Row, path: Path) -> Figure:
    where = f"{path}: run {row['run_id']}: a figure"
    metric, network, source, target = (
        _text(row, column, where) for column in ("metric", "network", "source", "target")
    )
    value, floor = (_number(row[column], where, column) for column in ("value", "floor"))
    return Figure(metric, network, source, target, value, floor)
