"""The clock collector (every host): what chronyd says of its own time, `chronyc -c tracking`.

node_exporter's timex collector reports the kernel's "synchronised" flag. A time server that
serves its own clock (chrony's `local`, the plan's `cluster.time_reference`) never sets that
flag, so it cannot tell a site's reference server doing its job from a host whose source is
gone; and a container (the lab's nodes) shares its host's flag. chronyd knows which it is: the
reference it tracks is a source (an NTP server, a reference clock), its own clock (reference ID
7F7F0101 while `local` is active), or nothing (leap status "Not synchronised").

`parse_tracking` is pure; `collect_clock` runs chronyc through an injected runner.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import Metric

from cluster_plan.exporters.slurm import Runner, run_command
from cluster_plan.exporters.textfile import CollectorError, family
from cluster_plan.monitoring import metrics

# -c: comma-separated values; -n: addresses, no DNS lookups (a collector never waits on DNS)
TRACKING = ["chronyc", "-c", "-n", "tracking"]
LOCAL_REFERENCE_ID = 0x7F7F0101  # chrony's reference ID while it serves its own clock
UNSYNCHRONISED = "Not synchronised"
FIELDS = 14  # reference ID, name, stratum, ref time, system time, ... leap status


@dataclass(frozen=True)
class Tracking:
    reference_id: int
    stratum: int
    system_offset_s: float  # chronyc's "System time": the correction chronyd is applying
    root_delay_s: float
    root_dispersion_s: float
    leap_status: str

    @property
    def local_reference(self) -> bool:
        """chronyd serves its own clock (its `local` directive is active)."""
        return self.reference_id == LOCAL_REFERENCE_ID

    @property
    def synchronised(self) -> bool:
        """chronyd tracks a real source: an NTP server or a reference clock."""
        return self.leap_status != UNSYNCHRONISED and self.reference_id not in (
            0,
            LOCAL_REFERENCE_ID,
        )


def parse_tracking(text: str) -> Tracking:
    """`chronyc -c tracking`'s one line; CollectorError when it is not that."""
    rows = [row for row in csv.reader(text.splitlines()) if row]
    if len(rows) != 1 or len(rows[0]) != FIELDS:
        raise CollectorError(f"chronyc tracking: expected one line of {FIELDS} fields: {text!r}")
    row = rows[0]
    try:
        return Tracking(
            reference_id=int(row[0], 16),
            stratum=int(row[2]),
            system_offset_s=_finite(row[4]),
            root_delay_s=_finite(row[10]),
            root_dispersion_s=_finite(row[11]),
            leap_status=row[13].strip(),
        )
    except ValueError as exc:
        raise CollectorError(f"chronyc tracking: {exc}: {text.strip()!r}") from None


def _finite(value: str) -> float:
    number = float(value)
    if number != number or abs(number) == float("inf"):
        raise ValueError(f"not a finite number: {value!r}")
    return number


def clock_families(tracking: Tracking) -> Iterator[Metric]:
    """The cluster_plan_clock_* families (pure)."""
    values = [
        (metrics.CLOCK_SYNCHRONISED, 1 if tracking.synchronised else 0),
        (metrics.CLOCK_LOCAL_REFERENCE, 1 if tracking.local_reference else 0),
        (metrics.CLOCK_STRATUM, tracking.stratum),
        (metrics.CLOCK_OFFSET, tracking.system_offset_s),
        (metrics.CLOCK_ROOT_DISTANCE, tracking.root_delay_s / 2 + tracking.root_dispersion_s),
    ]
    for metric, value in values:
        gauge = family(metric)
        gauge.add_metric([], value)
        yield gauge


def collect_clock(run: Runner = run_command) -> list[Any]:
    """Ask chronyd; CollectorError when chronyc fails (chronyd down: ClockServiceStopped)."""
    code, out, err = run(TRACKING)
    if code != 0:
        raise CollectorError(f"{' '.join(TRACKING)}: exit {code}: {err.strip() or out.strip()}")
    return list(clock_families(parse_tracking(out)))
