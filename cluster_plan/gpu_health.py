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

from cluster_plan import catalog as accelerator_catalog
from cluster_plan.defaults import section_defaults
from cluster_plan.input_files import InputError, read_json

Status = Literal["pass", "warn", "fail"]

# The plan's acceptance.gpu defaults (cluster_plan.defaults), for runs without a plan too.
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


def _judge_gpu(
    gpu: Mapping[str, Any], entry: Mapping[str, Any] | None, limits: Mapping[str, Any]
) -> list[dict[str, Any]]:
    index = gpu.get("index")
    out: list[dict[str, Any]] = []
    add = out.append

    if entry is not None:
        names = list(entry.get("nvml_names") or [])
        name = gpu.get("name")
        add(
            _finding(
                index,
                "model",
                "pass" if name in names else "fail",
                name,
                names,
                f"GPU {index} is {name!r}"
                + ("" if name in names else f", the plan says one of {names}"),
            )
        )
        planned_mib = entry.get("memory_mib")
        memory = gpu.get("memory_total_mib")
        if planned_mib and memory is not None:
            slack = planned_mib * float(limits["memory_tolerance_pct"]) / 100
            ok = abs(memory - planned_mib) <= slack
            add(
                _finding(
                    index,
                    "memory",
                    "pass" if ok else "fail",
                    memory,
                    planned_mib,
                    f"GPU {index} has {memory} MiB, the catalog says {planned_mib} MiB",
                )
            )

    temp = gpu.get("temperature_c")
    if temp is not None:
        slowdown = (gpu.get("temperature_thresholds_c") or {}).get("slowdown")
        limit = int(limits["max_temp_c"])
        if slowdown is not None:
            limit = min(limit, int(slowdown) - 1)
        below = "" if slowdown is None else f", below the GPU's slowdown at {slowdown} C"
        add(
            _finding(
                index,
                "temperature",
                "pass" if temp <= limit else "fail",
                temp,
                limit,
                f"GPU {index} is at {temp} C (limit {limit} C: the plan's max_temp_c "
                f"{limits['max_temp_c']}{below})",
            )
        )

    ecc = gpu.get("ecc")
    if ecc is not None:
        if not ecc.get("enabled"):
            add(_finding(index, "ecc_mode", "warn", False, True, f"GPU {index} runs without ECC"))
        volatile = ecc.get("volatile_uncorrected") or 0
        allowed = int(limits["max_ecc_uncorrected"])
        add(
            _finding(
                index,
                "ecc_uncorrected",
                "pass" if volatile <= allowed else "fail",
                volatile,
                allowed,
                f"GPU {index}: {volatile} uncorrectable ECC errors since the driver loaded",
            )
        )

    rows = gpu.get("remapped_rows")
    if rows is not None:
        pending = int(bool(rows.get("pending")))
        too_many = pending > int(limits["max_remapped_rows_pending"])
        status: Status = "fail" if too_many or rows.get("failure") else "pass"
        why = (
            "a row remap failed: replace the GPU"
            if rows.get("failure")
            else "a row remap is pending: reset the GPU before it takes work"
            if pending
            else "no row remap pending"
        )
        add(
            _finding(
                index,
                "remapped_rows",
                status,
                rows,
                {"pending": False, "failure": False},
                f"GPU {index}: {why}",
            )
        )

    pages = gpu.get("retired_pages")
    if pages is not None:
        total = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
        bad = pages.get("pending") or total > int(limits["max_retired_pages"])
        add(
            _finding(
                index,
                "retired_pages",
                "fail" if bad else "pass",
                pages,
                {"pending": False, "max": limits["max_retired_pages"]},
                f"GPU {index}: {total} retired pages"
                + (", retirement pending a reset" if pages.get("pending") else ""),
            )
        )

    pcie = gpu.get("pcie") or {}
    width, width_max = pcie.get("width_current"), pcie.get("width_max")
    if width is not None and width_max:
        ratio = float(limits["min_pcie_width_ratio"])
        wanted = f"x{width_max}" if ratio >= 1 else f">= {ratio:g} of x{width_max}"
        add(
            _finding(
                index,
                "pcie_width",
                "pass" if width >= ratio * width_max else "fail",
                f"x{width}",
                wanted,
                f"GPU {index} PCIe link trained at x{width} of x{width_max}"
                f" (gen {pcie.get('generation_current')} of {pcie.get('generation_max')})",
            )
        )

    links = gpu.get("nvlinks") or []
    if links and limits["require_nvlink"]:
        down = [link["link"] for link in links if not link.get("active")]
        add(
            _finding(
                index,
                "nvlink",
                "fail" if down else "pass",
                f"{len(links) - len(down)}/{len(links)} active",
                f"{len(links)} active",
                f"GPU {index}: NVLink {', '.join(map(str, down))} down"
                if down
                else f"GPU {index}: all {len(links)} NVLinks active",
            )
        )

    reasons = gpu.get("clock_event_reasons") or []
    slow = [r for r in reasons if r in SLOWDOWN_REASONS]
    if slow:
        add(
            _finding(
                index,
                "clock_events",
                "warn",
                slow,
                [],
                f"GPU {index} clocks held down by {', '.join(slow)}",
            )
        )

    for error in gpu.get("errors") or []:
        add(
            _finding(
                index, "nvml_query", "warn", error, None, f"GPU {index}: NVML query failed: {error}"
            )
        )
    return out


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
    findings: list[dict[str, Any]] = []
    gpus = list(facts.get("gpus") or [])
    pci_gpus = [d for d in facts.get("pci_devices") or [] if d.get("kind") == "gpu"]
    model = accelerators.get("model") if accelerators else None
    entry: Mapping[str, Any] | None = None
    if model is not None:
        entry = accelerators.get("catalog") if accelerators else None
        entry = entry or accelerator_catalog.load_catalog().get(str(model))
    planned_nvidia = bool(entry) and (entry or {}).get("vendor") == "nvidia"
    planned = int(accelerators.get("count") or 0) if accelerators and planned_nvidia else 0
    report = {
        "node": node,
        "model": model,
        "planned_gpus": planned,
        "gpus": gpus,
        "findings": findings,
    }

    if not planned_nvidia and not gpus and not pci_gpus:
        why = (
            f"accelerator {model} is not an NVIDIA GPU: NVML checks do not apply"
            if model
            else "no NVIDIA GPU planned or present"
        )
        findings.append(_finding(None, "plan", "pass", None, None, why))
        return {**report, "verdict": "skipped"}

    if absent_gpus == "skip" and not facts.get("available"):
        planned_text = f"the plan says {planned}x {model}" if planned_nvidia else "no GPU planned"
        findings.append(
            _finding(
                None,
                "plan",
                "pass",
                len(pci_gpus),
                planned,
                f"{planned_text}; {len(pci_gpus)} NVIDIA PCI device(s) and "
                f"{facts.get('error') or 'NVML not available'}: skipped, as asked for hosts "
                "whose GPUs cannot be reached (the lab)",
            )
        )
        return {**report, "verdict": "skipped"}

    if not facts.get("available"):
        error = facts.get("error") or "NVML not available"
        hint = (
            f"; {len(pci_gpus)} NVIDIA GPU(s) on the PCI bus: is the driver loaded?"
            if pci_gpus
            else ""
        )
        findings.append(_finding(None, "nvml", "fail", error, "NVML available", f"{error}{hint}"))
    else:
        findings.append(
            _finding(
                None,
                "nvml",
                "pass",
                facts.get("driver_version"),
                None,
                f"NVML answered, driver {facts.get('driver_version')}",
            )
        )
        expected_name = f"{planned}x {model}" if planned else "no NVIDIA GPU"
        findings.append(
            _finding(
                None,
                "count",
                "pass" if len(gpus) == planned else "fail",
                len(gpus),
                planned,
                f"{len(gpus)} GPU(s) found, the plan says {expected_name}",
            )
        )
        if len(pci_gpus) > len(gpus):
            findings.append(
                _finding(
                    None,
                    "pci",
                    "fail",
                    len(pci_gpus),
                    len(gpus),
                    f"{len(pci_gpus) - len(gpus)} NVIDIA GPU(s) on the PCI bus are not visible to "
                    "NVML (fallen off the bus?)",
                )
            )
        if expected_driver_branch is not None:
            loaded = str(facts.get("driver_version") or "")
            ok = loaded.split(".")[0] == str(expected_driver_branch)
            findings.append(
                _finding(
                    None,
                    "driver",
                    "pass" if ok else "fail",
                    loaded,
                    expected_driver_branch,
                    f"driver {loaded}, expected branch {expected_driver_branch}",
                )
            )
        for gpu in gpus:
            findings.extend(_judge_gpu(gpu, entry if planned_nvidia else None, limits))
        findings.extend(_judge_xids(facts, limits))

    verdict = "fail" if any(f["status"] == "fail" for f in findings) else "pass"
    return {**report, "verdict": verdict}


def failures(report: Mapping[str, Any]) -> list[str]:
    """The failing findings' messages, for a task's fail_msg."""
    return [f["message"] for f in report["findings"] if f["status"] == "fail"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster_plan.gpu_health",
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
