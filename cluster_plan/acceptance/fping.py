"""fping output -> per-target probe samples (latency, loss, MTU), or failed measurements.

`fping -C N -q` prints, on stderr, one line per target: `addr : 0.05 0.04 - 0.06`, one value per
probe, `-` for a lost one. `fping -c N -q` prints `addr : xmt/rcv/%loss = 3/3/0%, ...`.
A target without such a line, or a line with the wrong number of probes, is a failed
measurement; so is a missing tool or a crash (exit status above 1).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cluster_plan.transport.execution import CommandResult

NOT_FOUND = 127
TIMED_OUT = 124
# fping: 0 all answered, 1 some did not; anything else is fping failing, not the network.
_FPING_OK = (0, 1)

_VCOUNT = re.compile(r"^(?P<target>\S+)\s+:\s+(?P<values>(?:[-\d.]+\s*)+)$")
_SUMMARY = re.compile(r"^(?P<target>\S+)\s+:\s+xmt/rcv/%loss\s+=\s+(?P<xmt>\d+)/(?P<rcv>\d+)/")


@dataclass(frozen=True)
class ProbeSample:
    sent: int
    received: int
    rtt_ms: tuple[float, ...]
    error: str | None
    raw: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def loss_pct(self) -> float | None:
        if not self.ok or self.sent == 0:
            return None
        return 100.0 * (self.sent - self.received) / self.sent

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.rtt_ms) if self.ok and self.rtt_ms else None

    @property
    def p99_ms(self) -> float | None:
        if not self.ok or not self.rtt_ms:
            return None
        ordered = sorted(self.rtt_ms)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


# A threshold of 0 means "no probe may be lost"; no finite count proves a loss rate of 0, so
# the test sends as many probes as a 0.1% threshold needs and fails on the first loss.
ZERO_LOSS_PROBES = 3000


def probes_for_loss(max_loss_pct: float) -> int:
    """Probes needed so that zero losses bound the loss below the threshold at 95%.

    With zero losses in n probes the exact one-sided 95% upper bound is 1 - 0.05**(1/n),
    about 3/n (the "rule of three"), so n = ceil(300 / max_loss_pct) (percent); a threshold
    of 0 gets ZERO_LOSS_PROBES.
    """
    if max_loss_pct < 0:
        raise ValueError("max_loss_pct must not be negative")
    if max_loss_pct == 0:
        return ZERO_LOSS_PROBES
    return math.ceil(300.0 / max_loss_pct - 1e-9)


def loss_upper_bound_pct(sent: int, received: int) -> float:
    """Exact (Clopper-Pearson) one-sided 95% upper bound of the loss rate, in percent."""
    if sent <= 0:
        return 100.0
    lost = sent - received
    if lost >= sent:
        return 100.0
    low, high = lost / sent, 1.0
    for _ in range(60):  # bisection on the binomial tail: P(X <= lost | p) = 0.05
        mid = (low + high) / 2
        if _binomial_cdf(lost, sent, mid) > 0.05:
            low = mid
        else:
            high = mid
    return 100.0 * high


def loss_lower_bound_pct(sent: int, received: int) -> float:
    """Exact (Clopper-Pearson) one-sided 95% lower bound of the loss rate, in percent."""
    lost = sent - received
    if sent <= 0 or lost <= 0:
        return 0.0
    low, high = 0.0, lost / sent
    for _ in range(60):  # P(X >= lost | p) = 0.05
        mid = (low + high) / 2
        if 1.0 - _binomial_cdf(lost - 1, sent, mid) < 0.05:
            low = mid
        else:
            high = mid
    return 100.0 * low


def _binomial_cdf(k: int, n: int, p: float) -> float:
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0 if k < n else 1.0
    log_term = n * math.log1p(-p)  # P(X = 0)
    total = math.exp(log_term)
    for i in range(1, k + 1):
        log_term += math.log((n - i + 1) / i) + math.log(p) - math.log1p(-p)
        total += math.exp(log_term)
    return min(total, 1.0)


def fping_latency_argv(
    source: str, targets: Sequence[str], probes: int, period_ms: int, interval_ms: int = 1
) -> list[str]:
    return [
        "fping", "--src", source, "--vcount", str(probes), "--quiet",
        "--period", str(period_ms), "--interval", str(interval_ms), "--timeout", "500",
        *targets,
    ]  # fmt: skip


def fping_mtu_argv(source: str, targets: Sequence[str], mtu: int, probes: int = 3) -> list[str]:
    # ICMP echo: 20 bytes of IP header and 8 of ICMP header, so data of MTU - 28 fills the MTU.
    return [
        "fping", "--src", source, "--dontfrag", "--size", str(mtu - 28),
        "--count", str(probes), "--quiet", "--period", "20", "--timeout", "500",
        *targets,
    ]  # fmt: skip


def _failed_all(
    result: CommandResult, targets: Sequence[str], error: str
) -> dict[str, ProbeSample]:
    raw = result.raw()
    return {t: ProbeSample(0, 0, (), error, raw) for t in targets}


def _tool_failure(result: CommandResult) -> str | None:
    if result.rc == NOT_FOUND:
        return "fping not found on the node"
    if result.rc == TIMED_OUT:
        return "fping timed out"
    if result.rc not in _FPING_OK:
        return f"fping failed with exit status {result.rc}"
    return None


def parse_fping_vcount(
    result: CommandResult, targets: Sequence[str], probes: int
) -> dict[str, ProbeSample]:
    """Parse `fping -C probes -q` (per-probe RTTs) for each target."""
    if error := _tool_failure(result):
        return _failed_all(result, targets, error)
    lines: dict[str, str] = {}
    for line in (result.stderr + "\n" + result.stdout).splitlines():
        if match := _VCOUNT.match(line.strip()):
            lines.setdefault(match["target"], match["values"])
    samples: dict[str, ProbeSample] = {}
    for target in targets:
        values = lines.get(target)
        if values is None:
            samples[target] = ProbeSample(
                0, 0, (), f"fping printed no result for {target}", result.raw()
            )
            continue
        tokens = values.split()
        rtts: list[float] = []
        bad = len(tokens) != probes
        for token in tokens:
            if token == "-":
                continue
            try:
                value = float(token)
            except ValueError:
                bad = True
                break
            if not math.isfinite(value) or value < 0:
                bad = True
                break
            rtts.append(value)
        if bad:
            samples[target] = ProbeSample(
                0,
                0,
                (),
                f"fping result for {target} is malformed ({len(tokens)} of {probes})",
                result.raw(),
            )
            continue
        samples[target] = ProbeSample(probes, len(rtts), tuple(rtts), None, None)
    return samples


def parse_fping_count(result: CommandResult, targets: Sequence[str]) -> dict[str, ProbeSample]:
    """Parse `fping -c N -q` summaries (used for the MTU probes)."""
    if error := _tool_failure(result):
        return _failed_all(result, targets, error)
    found: dict[str, tuple[int, int]] = {}
    for line in (result.stderr + "\n" + result.stdout).splitlines():
        if match := _SUMMARY.match(line.strip()):
            found.setdefault(match["target"], (int(match["xmt"]), int(match["rcv"])))
    samples: dict[str, ProbeSample] = {}
    for target in targets:
        if target not in found:
            samples[target] = ProbeSample(
                0, 0, (), f"fping printed no result for {target}", result.raw()
            )
            continue
        sent, received = found[target]
        if sent == 0 or received > sent:
            samples[target] = ProbeSample(
                0, 0, (), f"fping result for {target} is malformed", result.raw()
            )
            continue
        raw = result.raw() if received < sent else None
        samples[target] = ProbeSample(sent, received, (), None, raw)
    return samples
