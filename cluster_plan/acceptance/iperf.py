"""iperf3 `-J` output -> one bandwidth sample, or a failed measurement with the raw output.

iperf3's JSON is not always JSON: it prints `nan`, prints an object twice after some errors,
and writes plain text after the object when interrupted. Only a single, complete, finite
object from a run that exited 0 counts; anything else is a failed measurement, never a pass.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cluster_plan.acceptance.starvation import EndCpu, iperf3_cpu, parse_probe, probe_argv
from cluster_plan.transport.execution import CommandResult

NOT_FOUND = 127
TIMED_OUT = 124
NOT_READ = EndCpu()  # a failed measurement's ends: nothing read


@dataclass(frozen=True)
class BandwidthSample:
    """Receiver-side goodput in bits/s: forward is client -> server, reverse server -> client."""

    forward_bps: float | None
    reverse_bps: float | None
    retransmits: int | None
    error: str | None
    raw: str | None
    # what each end's CPU did meanwhile (cluster_plan.acceptance.starvation)
    client_cpu: EndCpu = NOT_READ
    server_cpu: EndCpu = NOT_READ

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def cpu_bound(self) -> bool:
        return self.client_cpu.bound or self.server_cpu.bound

    def with_server_probe(self, server: CommandResult) -> BandwidthSample:
        """The sample with what the server's probe printed (its stderr, once it stopped)."""
        host = parse_probe(server.stderr)
        return replace(self, server_cpu=replace(self.server_cpu, host=host)) if host else self

    @property
    def bps(self) -> float | None:
        """The slower direction: a link is as good as its worse half."""
        values = [v for v in (self.forward_bps, self.reverse_bps) if v is not None]
        return min(values) if self.ok and values else None


def iperf3_client_argv(
    server: str,
    bind: str,
    port: int,
    duration_s: float,
    omit_s: int,
    bidir: bool = True,
) -> list[str]:
    argv = [
        "iperf3", "--client", server, "--bind", bind, "--port", str(port),
        "--time", f"{duration_s:g}", "--omit", str(omit_s), "--json",
        "--connect-timeout", "3000",
    ]  # fmt: skip
    if bidir:
        argv.append("--bidir")
    return probe_argv(argv)


def iperf3_server_argv(bind: str, port: int, limit_s: float) -> list[str]:
    # `timeout` bounds a server whose client never came, whatever the transport does on stop
    # (it signals its whole process group: the probe's shell and iperf3 under it).
    return [
        "timeout", f"{limit_s:g}",
        *probe_argv(["iperf3", "--server", "--one-off", "--bind", bind, "--port", str(port)]),
    ]  # fmt: skip


def failed(result: CommandResult, error: str) -> BandwidthSample:
    return BandwidthSample(None, None, None, error, result.raw())


def parse_iperf3(result: CommandResult) -> BandwidthSample:
    if result.rc == NOT_FOUND:
        return failed(result, "iperf3 not found on the node")
    if result.rc == TIMED_OUT:
        return failed(result, "iperf3 timed out")
    text = result.stdout.strip()
    if not text:
        return failed(result, f"iperf3 printed nothing (exit status {result.rc})")
    try:
        document, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        return failed(result, f"iperf3 output is not JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(document, dict):
        return failed(result, "iperf3 output is not a JSON object")
    if document.get("error"):
        return failed(result, f"iperf3: {document['error']}")
    rest = text[end:].strip()
    if rest.startswith("{"):
        return failed(result, "iperf3 printed more than one JSON object")
    if rest:
        return failed(result, f"iperf3 printed text after its JSON: {rest.splitlines()[0][:80]!r}")
    if result.rc != 0:
        return failed(result, f"iperf3 exited with status {result.rc}")
    return _sample_from(document, result)


def _sample_from(document: Mapping[str, Any], result: CommandResult) -> BandwidthSample:
    end = document.get("end")
    if not isinstance(end, dict):
        return failed(result, "iperf3 JSON has no 'end' section")
    forward = _bps(end.get("sum_received"))
    if forward is None:
        return failed(result, "iperf3 JSON has no finite end.sum_received.bits_per_second")
    reverse: float | None = None
    if "sum_received_bidir_reverse" in end:
        reverse = _bps(end.get("sum_received_bidir_reverse"))
        if reverse is None:
            return failed(result, "iperf3 JSON has no finite reverse bits_per_second")
    retransmits = sum(
        int(section.get("retransmits", 0))
        for key in ("sum_sent", "sum_sent_bidir_reverse")
        if isinstance(section := end.get(key), dict)
        and isinstance(section.get("retransmits", 0), int)
    )
    client_pct, server_pct = iperf3_cpu(end)
    return BandwidthSample(
        forward, reverse, retransmits, None, None,
        client_cpu=EndCpu(client_pct, parse_probe(result.stderr)),
        server_cpu=EndCpu(server_pct),
    )  # fmt: skip


def _bps(section: object) -> float | None:
    if not isinstance(section, dict):
        return None
    value = section.get("bits_per_second")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def describe(samples: Sequence[BandwidthSample]) -> str:
    return ", ".join(f"{s.bps / 1e9:.3f} Gb/s" if s.bps is not None else "error" for s in samples)
