"""Judge a node's NVML facts against the plan: model, count, memory and health thresholds.

Pure: the ``nvml_facts`` module's dict, the host's ``plan_host.accelerators`` and the plan's
``acceptance.gpu`` section in, one report dict per node out (it joins the acceptance report):

    {node, gpus: [...], findings: [{gpu, check, status, observed, expected, message}],
     verdict: pass | fail | skipped}

Every check is reported, passing ones too, so a report shows what was looked at.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from cluster_plan.plan import catalog as accelerator_catalog
from cluster_plan.plan.defaults import section_defaults
from cluster_plan.plan.input_files import InputError, read_json

Status = Literal["pass", "warn", "fail"]

# The plan's acceptance.gpu defaults (cluster_plan.plan.defaults), for runs without a plan too.
DEFAULT_THRESHOLDS: dict[str, Any] = section_defaults("acceptance.gpu")

# Clock-event reasons that mean the hardware, not the workload, slowed the GPU.
MAX_FACTS_BYTES = 64 * 1024 * 1024  # nvml_facts of a node is some KB
SLOWDOWN_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


def thresholds_from_plan(acceptance_gpu: Mapping[str, Any] | None) -> dict[str, Any]:
    """The plan's acceptance.gpu section over the defaults."""
    return {**DEFAULT_THRESHOLDS, **dict(acceptance_gpu or {})}


def _finding(
    gpu: int | None, check: str, status: Status, observed: Any, expected: Any, message: str
) -> dict[str, Any]:
    return {
        "gpu": gpu,
        "check": check,
        "status": status,
        "observed": observed,
        "expected": expected,
        "message": message,
    }


def _bus_prefix(bus_id: str | None) -> str:
    """``00000000:18:00.0`` and ``0000:18:00`` both become ``18:00`` (bus:device)."""
    if not bus_id:
        return ""
    parts = bus_id.lower().split(":")
    return ":".join(parts[-2:]).split(".")[0] if len(parts) >= 2 else bus_id.lower()


Findings = list[dict[str, Any]]


def _model(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
           limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    if entry is None:
        return []
    names = list(entry.get("nvml_names") or [])
    name = gpu.get("name")
    known = name in names
    message = f"GPU {index} is {name!r}" + ("" if known else f", the plan says one of {names}")
    return [_finding(index, "model", "pass" if known else "fail", name, names, message)]


def _memory(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
            limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    planned_mib = entry.get("memory_mib") if entry is not None else None
    memory = gpu.get("memory_total_mib")
    if not planned_mib or memory is None:
        return []
    slack = planned_mib * float(limits["memory_tolerance_pct"]) / 100
    status: Status = "pass" if abs(memory - planned_mib) <= slack else "fail"
    message = f"GPU {index} has {memory} MiB, the catalog says {planned_mib} MiB"
    return [_finding(index, "memory", status, memory, planned_mib, message)]


def _temperature(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
                 limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    temp = gpu.get("temperature_c")
    if temp is None:
        return []
    slowdown = (gpu.get("temperature_thresholds_c") or {}).get("slowdown")
    limit = int(limits["max_temp_c"])
    if slowdown is not None:
        limit = min(limit, int(slowdown) - 1)
    below = "" if slowdown is None else f", below the GPU's slowdown at {slowdown} C"
    message = (
        f"GPU {index} is at {temp} C (limit {limit} C: the plan's max_temp_c "
        f"{limits['max_temp_c']}{below})"
    )
    return [_finding(index, "temperature", "pass" if temp <= limit else "fail", temp, limit,
                     message)]  # fmt: skip


def _ecc(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
         limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    ecc = gpu.get("ecc")
    if ecc is None:
        return []
    out = []
    if not ecc.get("enabled"):
        out.append(
            _finding(index, "ecc_mode", "warn", False, True, f"GPU {index} runs without ECC")
        )
    volatile = ecc.get("volatile_uncorrected") or 0
    allowed = int(limits["max_ecc_uncorrected"])
    message = f"GPU {index}: {volatile} uncorrectable ECC errors since the driver loaded"
    status: Status = "pass" if volatile <= allowed else "fail"
    out.append(_finding(index, "ecc_uncorrected", status, volatile, allowed, message))
    return out


def _remapped_rows(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
                   limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    rows = gpu.get("remapped_rows")
    if rows is None:
        return []
    pending = int(bool(rows.get("pending")))
    too_many = pending > int(limits["max_remapped_rows_pending"])
    status: Status = "fail" if too_many or rows.get("failure") else "pass"
    if rows.get("failure"):
        why = "a row remap failed: replace the GPU"
    elif pending:
        why = "a row remap is pending: reset the GPU before it takes work"
    else:
        why = "no row remap pending"
    expected = {"pending": False, "failure": False}
    return [_finding(index, "remapped_rows", status, rows, expected, f"GPU {index}: {why}")]


def _retired_pages(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
                   limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    pages = gpu.get("retired_pages")
    if pages is None:
        return []
    total = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
    bad = pages.get("pending") or total > int(limits["max_retired_pages"])
    expected = {"pending": False, "max": limits["max_retired_pages"]}
    pending = ", retirement pending a reset" if pages.get("pending") else ""
    message = f"GPU {index}: {total} retired pages{pending}"
    return [_finding(index, "retired_pages", "fail" if bad else "pass", pages, expected, message)]


def _pcie_width(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
                limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    pcie = gpu.get("pcie") or {}
    width, width_max = pcie.get("width_current"), pcie.get("width_max")
    if width is None or not width_max:
        return []
    ratio = float(limits["min_pcie_width_ratio"])
    wanted = f"x{width_max}" if ratio >= 1 else f">= {ratio:g} of x{width_max}"
    status: Status = "pass" if width >= ratio * width_max else "fail"
    message = (
        f"GPU {index} PCIe link trained at x{width} of x{width_max}"
        f" (gen {pcie.get('generation_current')} of {pcie.get('generation_max')})"
    )
    return [_finding(index, "pcie_width", status, f"x{width}", wanted, message)]


def _nvlink(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
            limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    links = gpu.get("nvlinks") or []
    if not links or not limits["require_nvlink"]:
        return []
    down = [link["link"] for link in links if not link.get("active")]
    message = (
        f"GPU {index}: NVLink {', '.join(map(str, down))} down"
        if down
        else f"GPU {index}: all {len(links)} NVLinks active"
    )
    observed = f"{len(links) - len(down)}/{len(links)} active"
    return [_finding(index, "nvlink", "fail" if down else "pass", observed,
                     f"{len(links)} active", message)]  # fmt: skip


def _clock_events(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
                  limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    slow = [r for r in gpu.get("clock_event_reasons") or [] if r in SLOWDOWN_REASONS]
    if not slow:
        return []
    message = f"GPU {index} clocks held down by {', '.join(slow)}"
    return [_finding(index, "clock_events", "warn", slow, [], message)]


def _nvml_errors(index: int | None, gpu: Mapping[str, Any], entry: Mapping[str, Any] | None,
                 limits: Mapping[str, Any]) -> Findings:  # fmt: skip
    return [
        _finding(
            index, "nvml_query", "warn", error, None, f"GPU {index}: NVML query failed: {error}"
        )
        for error in gpu.get("errors") or []
    ]


# One GPU's checks, in the order the report lists them; each returns its findings (none when
# NVML did not report what it looks at).
GPU_CHECKS = (
    _model,
    _memory,
    _temperature,
    _ecc,
    _remapped_rows,
    _retired_pages,
    _pcie_width,
    _nvlink,
    _clock_events,
    _nvml_errors,
)


def _judge_gpu(
    gpu: Mapping[str, Any], entry: Mapping[str, Any] | None, limits: Mapping[str, Any]
) -> Findings:
    index = gpu.get("index")
    return [finding for check in GPU_CHECKS for finding in check(index, gpu, entry, limits)]


def _judge_xids(facts: Mapping[str, Any], limits: Mapping[str, Any]) -> list[dict[str, Any]]:
    xid = facts.get("xid") or {}
    gpu_by_bus = {_bus_prefix(g.get("pci_bus_id")): g.get("index") for g in facts["gpus"]}
    fatal = {int(x) for x in limits["fail_on_xids"]}
    out = []
    for event in xid.get("events") or []:
        gpu = gpu_by_bus.get(_bus_prefix(event.get("pci_bus_id")))
        code = int(event["xid"])
        where = f"GPU {gpu}" if gpu is not None else f"PCI {event.get('pci_bus_id')}"
        out.append(
            _finding(
                gpu,
                "xid",
                "fail" if code in fatal else "warn",
                code,
                None,
                f"{where}: XID {code} at {event.get('time')}: {event.get('message')}",
            )
        )
    if xid.get("error") and xid.get("error") != "not collected":
        out.append(
            _finding(
                None, "xid", "warn", xid["error"], None, f"kernel log not read: {xid['error']}"
            )
        )
    return out


def _planned(accelerators: Mapping[str, Any] | None) -> tuple[Any, Mapping[str, Any] | None, int]:
    """The plan's model, its catalog entry when it is an NVIDIA GPU, and the planned count."""
    model = accelerators.get("model") if accelerators else None
    if model is None or not accelerators:
        return model, None, 0
    entry = accelerators.get("catalog") or accelerator_catalog.load_catalog().get(str(model))
    if not entry or entry.get("vendor") != "nvidia":
        return model, None, 0
    return model, entry, int(accelerators.get("count") or 0)


def _skip(
    facts: Mapping[str, Any],
    model: Any,
    entry: Mapping[str, Any] | None,
    planned: int,
    absent_gpus: Literal["fail", "skip"],
) -> dict[str, Any] | None:
    """The one finding of a node whose GPUs are not judged; None when they are."""
    gpus = facts.get("gpus") or []
    pci_gpus = [d for d in facts.get("pci_devices") or [] if d.get("kind") == "gpu"]
    if entry is None and not gpus and not pci_gpus:
        why = (
            f"accelerator {model} is not an NVIDIA GPU: NVML checks do not apply"
            if model
            else "no NVIDIA GPU planned or present"
        )
        return _finding(None, "plan", "pass", None, None, why)
    if absent_gpus == "skip" and not facts.get("available"):
        planned_text = f"the plan says {planned}x {model}" if entry else "no GPU planned"
        message = (
            f"{planned_text}; {len(pci_gpus)} NVIDIA PCI device(s) and "
            f"{facts.get('error') or 'NVML not available'}: skipped, as asked for hosts "
            "whose GPUs cannot be reached (the lab)"
        )
        return _finding(None, "plan", "pass", len(pci_gpus), planned, message)
    return None


def _node_findings(
    facts: Mapping[str, Any], model: Any, planned: int, expected_driver_branch: int | None
) -> Findings:
    """NVML itself, the GPU count, GPUs NVML does not see, and the driver branch."""
    gpus = facts.get("gpus") or []
    pci_gpus = [d for d in facts.get("pci_devices") or [] if d.get("kind") == "gpu"]
    if not facts.get("available"):
        error = facts.get("error") or "NVML not available"
        hint = (
            f"; {len(pci_gpus)} NVIDIA GPU(s) on the PCI bus: is the driver loaded?"
            if pci_gpus
            else ""
        )
        return [_finding(None, "nvml", "fail", error, "NVML available", f"{error}{hint}")]
    version = facts.get("driver_version")
    expected_name = f"{planned}x {model}" if planned else "no NVIDIA GPU"
    out = [
        _finding(None, "nvml", "pass", version, None, f"NVML answered, driver {version}"),
        _finding(None, "count", "pass" if len(gpus) == planned else "fail", len(gpus), planned,
                 f"{len(gpus)} GPU(s) found, the plan says {expected_name}"),
    ]  # fmt: skip
    if len(pci_gpus) > len(gpus):
        message = (
            f"{len(pci_gpus) - len(gpus)} NVIDIA GPU(s) on the PCI bus are not visible to "
            "NVML (fallen off the bus?)"
        )
        out.append(_finding(None, "pci", "fail", len(pci_gpus), len(gpus), message))
    if expected_driver_branch is not None:
        loaded = str(version or "")
        status: Status = "pass" if loaded.split(".")[0] == str(expected_driver_branch) else "fail"
        message = f"driver {loaded}, expected branch {expected_driver_branch}"
        out.append(_finding(None, "driver", status, loaded, expected_driver_branch, message))
    return out


def judge_node(
    node: str,
    facts: Mapping[str, Any],
    accelerators: Mapping[str, Any] | None,
    acceptance_gpu: Mapping[str, Any] | None = None,
    expected_driver_branch: int | None = None,
    absent_gpus: Literal["fail", "skip"] = "fail",
) -> dict[str, Any]:
    """The node's GPU report. ``accelerators`` is ``plan_host.accelerators`` (or None).

    ``absent_gpus="skip"`` skips a node where NVML is not available (the lab's nodes: no GPU,
    or the host's GPUs seen through a shared sysfs); a real cluster keeps the default and
    fails a planned GPU node without NVML.
    """
    limits = thresholds_from_plan(acceptance_gpu)
    gpus = list(facts.get("gpus") or [])
    model, entry, planned = _planned(accelerators)
    report = {"node": node, "model": model, "planned_gpus": planned, "gpus": gpus}
    skipped = _skip(facts, model, entry, planned, absent_gpus)
    if skipped is not None:
        return {**report, "findings": [skipped], "verdict": "skipped"}
    findings = _node_findings(facts, model, planned, expected_driver_branch)
    if facts.get("available"):
        for gpu in gpus:
            findings.extend(_judge_gpu(gpu, entry, limits))
        findings.extend(_judge_xids(facts, limits))
    verdict = "fail" if any(f["status"] == "fail" for f in findings) else "pass"
    return {**report, "findings": findings, "verdict": verdict}


def failures(report: Mapping[str, Any]) -> list[str]:
    """The failing findings' messages, for a task's fail_msg."""
    return [f["message"] for f in report["findings"] if f["status"] == "fail"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster_plan.gpu.health",
        description="Judge nvml_facts output (JSON) against a planned GPU model and count.",
    )
    parser.add_argument("facts", type=Path, help="JSON written from the nvml_facts module")
    parser.add_argument("--model", help="catalog model the plan puts on the node")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--node", default="node")
    parser.add_argument("--max-temp-c", type=int)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="an acceptance.gpu threshold, e.g. --set require_nvlink=false",
    )
    args = parser.parse_args(argv)
    acceptance: dict[str, Any] = {} if args.max_temp_c is None else {"max_temp_c": args.max_temp_c}
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in DEFAULT_THRESHOLDS:
            print(
                f"unknown threshold {key!r}; known: {', '.join(DEFAULT_THRESHOLDS)}",
                file=sys.stderr,
            )
            return 2
        try:
            acceptance[key] = json.loads(value)
        except ValueError:
            print(f"--set {item}: the value must be JSON (e.g. false, 80, [79])", file=sys.stderr)
            return 2
    try:
        facts = read_json(args.facts, MAX_FACTS_BYTES, "NVML facts (JSON)")
    except InputError as err:
        print(f"cannot read {err}", file=sys.stderr)
        return 2
    if not isinstance(facts, dict):
        print(f"cannot read {args.facts}: not NVML facts (a JSON object)", file=sys.stderr)
        return 2
    accelerators = {"model": args.model, "count": args.count} if args.model else None
    report = judge_node(args.node, facts.get("nvml", facts), accelerators, acceptance)
    print(json.dumps(report, indent=2))
    return 1 if report["verdict"] == "fail" else 0


if __name__ == "__main__":
    raise SystemExit(main())
