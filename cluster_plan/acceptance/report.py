"""The acceptance report: one JSON document (schemas/acceptance-report.schema.json)."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cluster_plan.acceptance.fping import ProbeSample, loss_upper_bound_pct
from cluster_plan.acceptance.iperf import BandwidthSample
from cluster_plan.acceptance.spec import AcceptanceSpec, Criteria
from cluster_plan.acceptance.starvation import EndCpu
from cluster_plan.acceptance.verdicts import (
    BandwidthTest,
    Finding,
    MtuTest,
    ProbeTest,
    bandwidth_median,
    bandwidth_verdict,
    is_outlier,
    latency_status,
    loss_status,
    mtu_status,
    nodes_at_fault,
)
from cluster_plan.output_files import (
    check_output,
    finite_json,
    json_document,
    marked,
    write_output,
)
from cluster_plan.plan.input_files import InputError, read_json

SCHEMA_ID = "https://cluster-plan.dev/schemas/acceptance-report.schema.json"
# data/acceptance-report.schema.json links to schemas/, so checkouts and wheels both find it
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "acceptance-report.schema.json"


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _bandwidth(sample: BandwidthSample, criteria: Criteria) -> dict[str, Any]:
    def gbps(bps: float | None) -> float | None:
        return _round(criteria.plan_gbps(bps)) if bps is not None else None

    return {
        "status": bandwidth_verdict(sample, criteria),
        "gbps": gbps(sample.bps),
        "forward_gbps": gbps(sample.forward_bps) if sample.ok else None,
        "reverse_gbps": gbps(sample.reverse_bps) if sample.ok else None,
        "measured_bps": _round(sample.bps, 0),
        "retransmits": sample.retransmits,
        "error": sample.error,
        "raw": sample.raw,
        "cpu": {"client": _end_cpu(sample.client_cpu), "server": _end_cpu(sample.server_cpu)},
    }


def _end_cpu(end: EndCpu) -> dict[str, Any]:
    host = end.host
    return {
        "bound": end.bound,
        "iperf3_pct": _round(end.iperf3_pct, 2),
        "wait_pct": host.wait_pct if host else None,
        "busy_pct": host.busy_pct if host else None,
        "steal_pct": host.steal_pct if host else None,
        "load1": host.load1 if host else None,
        "cpus": host.cpus if host else None,
    }


def _probe(sample: ProbeSample, criteria: Criteria) -> dict[str, Any]:
    return {
        "latency_status": latency_status(sample, criteria),
        "loss_status": loss_status(sample, criteria),
        "sent": sample.sent,
        "received": sample.received,
        "loss_pct": _round(sample.loss_pct),
        "loss_upper_bound_pct": (
            _round(loss_upper_bound_pct(sample.sent, sample.received)) if sample.ok else None
        ),
        "rtt_median_ms": _round(sample.median_ms),
        "rtt_p99_ms": _round(sample.p99_ms),
        "error": sample.error,
        "raw": sample.raw,
    }


def _mtu(sample: ProbeSample) -> dict[str, Any]:
    return {
        "status": mtu_status(sample),
        "sent": sample.sent,
        "received": sample.received,
        "error": sample.error,
        "raw": sample.raw,
    }


def build_report(
    spec: AcceptanceSpec,
    bandwidth: Sequence[BandwidthTest],
    probes: Sequence[ProbeTest],
    mtu: Sequence[MtuTest],
    findings: Sequence[Finding],
    timing: Mapping[str, Any],
    omit_s: int,
    storage: Mapping[str, Any] | None = None,
    collectives: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    c = spec.criteria
    medians = {
        n.name: bandwidth_median(t for t in bandwidth if t.network == n.name) for n in spec.networks
    }
    bw_rows = []
    for t in bandwidth:
        row = {"network": t.network, "client": t.client, "server": t.server, "round": t.round}
        row |= _bandwidth(t.final, c)
        row["outlier"] = is_outlier(t.final, medians[t.network], c)
        row["first_attempt"] = _bandwidth(t.sample, c) if t.retest else None
        bw_rows.append(row)
    probe_rows = []
    for p in probes:
        row = {"network": p.network, "source": p.source, "target": p.target}
        row |= _probe(p.final, c)
        row["first_attempt"] = _probe(p.sample, c) if p.retest else None
        probe_rows.append(row)
    mtu_rows = [
        {"network": m.network, "source": m.source, "target": m.target, "mtu": m.mtu}
        | _mtu(m.final)
        | {"first_attempt": _mtu(m.sample) if m.retest else None}
        for m in mtu
    ]
    report = {
        "$schema": SCHEMA_ID,
        "report": "network-acceptance",
        "version": 1,
        "cluster": spec.cluster,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "passed": False,  # judged below, from the findings and the storage section
        "criteria": {
            "min_gbps": c.min_gbps,
            "max_latency_ms": c.max_latency_ms,
            "max_loss_pct": c.max_loss_pct,
            "duration_s": c.duration_s,
            "omit_s": omit_s,
            "rate_scale": c.rate_scale,
            "probes": c.probes,
            "outlier_fraction": c.outlier_fraction,
        },
        "networks": [
            {
                "name": n.name,
                "mtu": n.mtu,
                "nodes": [
                    {"name": x.name, "address": x.address, "access_switch": x.access_switch}
                    for x in n.nodes
                ],
            }
            for n in spec.networks
        ],
        "bandwidth": bw_rows,
        "probes": probe_rows,
        "mtu": mtu_rows,
        "findings": [f.as_dict() for f in findings],
        "nodes_at_fault": nodes_at_fault(findings),
        "timing": dict(timing),
    }
    if storage is not None:
        report["storage"] = dict(storage)
    if collectives is not None:
        report["collectives"] = dict(collectives)
    report["passed"] = judge_report(report)
    return report


class ReportError(ValueError):
    """The file is not a readable acceptance report; the message says why."""


MAX_REPORT_BYTES = 256 * 1024 * 1024  # raw outputs of every pair of a large cluster


def load_report(path: Path) -> dict[str, Any]:
    try:
        document = read_json(path, MAX_REPORT_BYTES, "an acceptance report (JSON)")
    except InputError as exc:
        raise ReportError(str(exc)) from None
    errors = validate_report(document)
    if errors:
        raise ReportError("\n".join(f"{path}: {e}" for e in errors))
    return dict(document)


def judge_report(report: Mapping[str, Any]) -> bool:
    """Whether the cluster passed, from the report's findings and the storage and collectives
    problems (what `passed` was made from), never from the `passed` flag a file may carry."""
    faults = [f for f in report["findings"] if f["severity"] == "fault"]
    storage = report.get("storage") or {}
    collectives = report.get("collectives") or {}
    return not faults and not storage.get("problems") and not collectives.get("problems")


def validate_report(document: object) -> list[str]:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{error.json_path}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    ]


def _is_report(data: Any) -> bool:
    return isinstance(data, dict) and data.get("report") == "network-acceptance"


# An existing acceptance.json or .html is replaced only when it is a report (or its page)
OWN_JSON = json_document(_is_report)


def own_html() -> Callable[[Path], bool]:
    from cluster_plan.acceptance.html import REPORT_MARK

    return marked(REPORT_MARK, "<title>Network acceptance: ")  # or an earlier version's page


def check_report_paths(directory: Path) -> None:
    """OutputError when the folder's acceptance.json or .html is not an earlier report:
    checked before anything is measured, so a refusal costs no run."""
    check_output(directory / "acceptance.json", OWN_JSON, "acceptance")
    check_output(directory / "acceptance.html", own_html(), "acceptance")


def write_report(report: Mapping[str, Any], directory: Path) -> tuple[Path, Path]:
    """acceptance.json and .html in the folder, each replaced in one rename; a number that is
    not finite is an OutputError naming its key, before either file is touched."""
    from cluster_plan.acceptance.html import render_html

    directory.mkdir(parents=True, exist_ok=True)
    json_path, html_path = directory / "acceptance.json", directory / "acceptance.html"
    text = finite_json(report, str(json_path), indent=2) + "\n"
    write_output(json_path, text, OWN_JSON, "acceptance")
    write_output(html_path, render_html(report), own_html(), "acceptance")
    return json_path, html_path
