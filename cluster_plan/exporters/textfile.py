"""Write a collector's metrics as a node_exporter textfile, atomically.

node_exporter reads every `*.prom` in its textfile directory at each scrape; a file read while
half written would be served half. So the text goes to a temporary file in the same directory
(same filesystem, so the rename is atomic; a name not ending in `.prom`, so node_exporter never
reads it) and replaces the old file with one rename.

A collector that fails removes its previous metrics file (values no longer true must not be
served as current, nor keep an alert firing or silent) and writes its status file,
`cluster_plan_collector_<name>.prom`, with cluster_plan_collector_success 0, so CollectorFailing
fires. An unexpected error (a bug) does the same, then is raised for its traceback.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from cluster_plan.monitoring import metrics

SUCCESS_METRIC = metrics.COLLECTOR_SUCCESS.name


class CollectorError(Exception):
    """A collector could not read its source; the message says which and why."""


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def family(metric: metrics.Metric) -> GaugeMetricFamily | CounterMetricFamily:
    """An empty family of a metric of the table (cluster_plan.monitoring.metrics): its name,
    type, help and labels."""
    kind = CounterMetricFamily if metric.type == "counter" else GaugeMetricFamily
    return kind(metric.name, metric.help, labels=list(metric.labels))


def exposition(families: Iterable[Metric]) -> str:
    """The Prometheus text format of some metric families."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry).decode()


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename (temporary file in the same directory)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)  # node_exporter runs as its own user
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def metrics_path(directory: Path, collector: str) -> Path:
    return directory / f"cluster_plan_{collector}.prom"


def status_path(directory: Path, collector: str) -> Path:
    return directory / f"cluster_plan_collector_{collector}.prom"


def status_text(collector: str, success: bool) -> str:
    return (
        f"# HELP {SUCCESS_METRIC} {metrics.COLLECTOR_SUCCESS.help}\n"
        f"# TYPE {SUCCESS_METRIC} {metrics.COLLECTOR_SUCCESS.type}\n"
        f'{SUCCESS_METRIC}{{collector="{collector}"}} {1 if success else 0}\n'
    )


def _failed(directory: Path, collector: str) -> None:
    """success 0, and no stale metrics left to be served."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(metrics_path(directory, collector))
    write_atomic(status_path(directory, collector), status_text(collector, False))


def run_collector(
    directory: Path, collector: str, collect: Callable[[], Iterable[Metric]]
) -> str | None:
    """Collect and write the textfiles; the failure's reason, or None when all went well.

    A CollectorError is a collector failure; anything else is a bug, and is raised once the
    failure is written the same way.
    """
    if not directory.is_dir():
        raise CollectorError(f"{directory}: no such directory (the textfile directory)")
    try:
        text = exposition(collect())
    except CollectorError as exc:
        _failed(directory, collector)
        return str(exc)
    except Exception:
        _failed(directory, collector)
        raise
    write_atomic(metrics_path(directory, collector), text)
    write_atomic(status_path(directory, collector), status_text(collector, True))
    return None
