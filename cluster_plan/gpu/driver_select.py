"""Choose the NVIDIA driver for a host from the GPU models the plan puts on it.

Pure: catalog entries in, a choice (or a refusal naming every reason) out. The nvidia_driver
role calls this through its filter plugin; ``python -m cluster_plan.gpu.driver_select MODEL...``
prints the choice for a set of catalog models.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from cluster_plan.plan import catalog as accelerator_catalog

KernelModules = Literal["open", "proprietary"]
KernelModulesPreference = Literal["auto", "open", "proprietary"]

# From R560 on NVIDIA installs the open kernel modules by default on GPUs that support them
# (Turing and newer); older branches default to the proprietary modules.
OPEN_MODULES_DEFAULT_FROM_BRANCH = 560


@dataclass(frozen=True)
class DriverChoice:
    """What to install on a host."""

    branch: int
    kernel_modules: KernelModules
    fabric_manager: bool  # NVSwitch boards need nvidia-fabricmanager of the same version
    models: tuple[str, ...]
    lts: bool
    pinned: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["models"] = list(self.models)
        return data


class DriverRefusal(ValueError):
    """No driver can be chosen; ``problems`` says why, every reason at once."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _covers(branch: int, branch_info: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    low = entry.get("min_driver_branch")
    high = entry.get("max_driver_branch")
    if entry.get("architecture") not in branch_info.get("architectures", []):
        return False
    if low is not None and branch < low:
        return False
    return high is None or branch <= high


def _why_not(
    model: str, branch: int, branch_info: Mapping[str, Any] | None, entry: Mapping[str, Any]
) -> str:
    low = entry.get("min_driver_branch")
    high = entry.get("max_driver_branch")
    if low is not None and branch < low:
        return f"branch {branch} is older than {model}'s minimum branch {low}"
    if high is not None and branch > high:
        return f"branch {branch} is newer than {model}'s last supported branch {high}"
    if branch_info is not None:
        return (
            f"branch {branch} does not support {model}'s architecture {entry.get('architecture')}"
        )
    return f"branch {branch} does not support {model}"


def _open_modules(entries: Mapping[str, Mapping[str, Any]], support: str) -> list[str]:
    """The models whose catalog entry says ``support`` (required, unsupported) of the open
    kernel modules."""
    return sorted(m for m, e in entries.items() if e.get("open_kernel_modules") == support)


def _kernel_modules(
    branch: int, entries: Mapping[str, Mapping[str, Any]], preference: KernelModulesPreference
) -> KernelModules | list[str]:
    """The kernel module flavour for ``branch``, or the reasons no flavour fits."""
    required = _open_modules(entries, "required")
    unsupported = _open_modules(entries, "unsupported")
    if required and unsupported:
        return [
            f"{', '.join(required)} need the open kernel modules, which "
            f"{', '.join(unsupported)} cannot use: put them on different hosts"
        ]
    if preference == "open" and unsupported:
        return [
            f"open kernel modules were asked for, but {', '.join(unsupported)} "
            "does not support them"
        ]
    if preference == "proprietary" and required:
        return [
            f"proprietary kernel modules were asked for, but {', '.join(required)} "
            "requires the open kernel modules"
        ]
    if required or preference == "open":
        return "open"
    if unsupported or preference == "proprietary":
        return "proprietary"
    return "open" if branch >= OPEN_MODULES_DEFAULT_FROM_BRANCH else "proprietary"


def select_driver(
    models: Iterable[str],
    *,
    pin: int | None = None,
    kernel_modules: KernelModulesPreference = "auto",
    available_branches: Iterable[int] | None = None,
    source_name: str = "this OS",
    catalog: Mapping[str, Mapping[str, Any]] | None = None,
    branches: Mapping[int, Mapping[str, Any]] | None = None,
    nvswitch: bool = False,
) -> DriverChoice | None:
    """The driver for a host carrying ``models`` (catalog keys).

    Returns ``None`` when no model is an NVIDIA GPU (nothing to install). Without a pin the
    newest branch that covers every model (and that ``available_branches``, the branches the
    OS package source offers, contains) wins. Raises :class:`DriverRefusal` otherwise.
    ``nvswitch`` says whether the host's GPU board has NVSwitch (a property of the board, not
    of the model: an 8-GPU HGX H100 board has it, a 4-GPU one does); then the fabric manager
    is part of the choice.
    """
    catalog = accelerator_catalog.load_catalog() if catalog is None else catalog
    branches = accelerator_catalog.driver_branches() if branches is None else branches
    entries = _nvidia_entries(models, catalog)
    if not entries:
        return None
    if kernel_modules not in ("auto", "open", "proprietary"):
        raise DriverRefusal(
            [f"kernel modules must be auto, open or proprietary, not {kernel_modules!r}"]
        )
    offered = (
        sorted(branches)
        if available_branches is None
        else sorted(b for b in branches if b in set(available_branches))
    )
    if pin is not None:
        _check_pin(pin, entries, kernel_modules, offered, source_name, branches)
        branch, reason = pin, f"branch {pin} pinned by the plan"
    else:
        branch = _newest_covering(entries, offered, source_name, branches)
        reason = f"newest branch covering {', '.join(sorted(entries))}"
    flavour = _kernel_modules(branch, entries, kernel_modules)
    if isinstance(flavour, list):  # a pin's refusal was raised above, with its own words
        raise DriverRefusal(flavour)
    lts = bool(branches[branch].get("lts"))
    return DriverChoice(branch, flavour, nvswitch, tuple(sorted(entries)), lts, pin is not None,
                        reason)  # fmt: skip


def _nvidia_entries(
    models: Iterable[str], catalog: Mapping[str, Mapping[str, Any]]
) -> dict[str, Mapping[str, Any]]:
    """The catalog entries of the NVIDIA models among ``models``; refuses unknown models."""
    unknown = [model for model in dict.fromkeys(models) if model not in catalog]
    if unknown:
        raise DriverRefusal([f"{model!r} is not in the accelerator catalog" for model in unknown])
    return {
        model: catalog[model]
        for model in dict.fromkeys(models)
        if catalog[model].get("vendor") == "nvidia"
    }


def _check_pin(
    pin: int,
    entries: Mapping[str, Mapping[str, Any]],
    kernel_modules: KernelModulesPreference,
    offered: list[int],
    source_name: str,
    branches: Mapping[int, Mapping[str, Any]],
) -> None:
    """Refuses a pinned branch that is unknown, misses a model, is not packaged, or has no
    kernel module flavour for the host, naming every reason at once."""
    info = branches.get(pin)
    if info is None:
        known = ", ".join(str(b) for b in sorted(branches))
        raise DriverRefusal([f"pinned branch {pin} is not a known driver branch (known: {known})"])
    problems = [_why_not(m, pin, info, e) for m, e in entries.items() if not _covers(pin, info, e)]
    if pin not in offered:
        problems.append(
            f"branch {pin} is not packaged for {source_name} "
            f"(offered: {', '.join(str(b) for b in offered) or 'none'})"
        )
    flavour = _kernel_modules(pin, entries, kernel_modules)
    if isinstance(flavour, list):
        problems.extend(flavour)
    if problems:
        raise DriverRefusal([f"pinned branch {pin} refused: {p}" for p in problems])


def _newest_covering(
    entries: Mapping[str, Mapping[str, Any]],
    offered: list[int],
    source_name: str,
    branches: Mapping[int, Mapping[str, Any]],
) -> int:
    """The newest offered branch that covers every model; refuses when none does."""
    covering = [b for b in offered if all(_covers(b, branches[b], e) for e in entries.values())]
    if covering:
        return covering[-1]
    ranges = ", ".join(
        f"{m} {e.get('min_driver_branch')}..{e.get('max_driver_branch') or 'newest'}"
        for m, e in sorted(entries.items())
    )
    offered_text = ", ".join(str(b) for b in offered) or "none"
    raise DriverRefusal(
        [
            f"no driver branch offered for {source_name} ({offered_text}) "
            f"covers every model on the host ({ranges})"
        ]
    )


def choice_for_host(
    accelerators: Mapping[str, Any] | None,
    *,
    pin: int | None = None,
    kernel_modules: KernelModulesPreference = "auto",
    available_branches: Iterable[int] | None = None,
    source_name: str = "this OS",
) -> dict[str, Any]:
    """The choice for one ``plan_host.accelerators`` value, as a plain dict for Ansible.

    ``install`` is false on hosts with no NVIDIA GPU in the plan; ``refusal`` carries the
    reasons when no driver can be chosen (the role fails the host with it). The fabric manager
    follows ``accelerators.nvswitch`` (expanded data older than that key: the catalog default
    for the model and count).
    """
    models = [] if not accelerators else [str(accelerators["model"])]
    nvswitch = False
    if accelerators:
        count = int(accelerators.get("count") or 0)
        nvswitch = (
            bool(accelerators["nvswitch"])
            if "nvswitch" in accelerators
            else accelerator_catalog.nvswitch_default(models[0], count)
        )
    result: dict[str, Any] = {
        "install": False,
        "branch": None,
        "kernel_modules": None,
        "fabric_manager": False,
        "models": models,
        "lts": False,
        "pinned": pin is not None,
        "reason": None,
        "refusal": None,
    }
    try:
        choice = select_driver(
            models,
            pin=pin,
            kernel_modules=kernel_modules,
            available_branches=available_branches,
            source_name=source_name,
            nvswitch=nvswitch,
        )
    except DriverRefusal as refusal:
        result["refusal"] = str(refusal)
        return result
    if choice is None:
        result["reason"] = "no NVIDIA GPU in the plan for this host"
        return result
    return {**choice.as_dict(), "install": True, "refusal": None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster_plan.gpu.driver_select",
        description="Print the NVIDIA driver chosen for a host with the given catalog models.",
    )
    parser.add_argument("models", nargs="+", help="catalog model names on one host")
    parser.add_argument("--pin", type=int, help="driver branch pinned by the plan")
    parser.add_argument("--kernel-modules", choices=["auto", "open", "proprietary"], default="auto")
    parser.add_argument(
        "--available", type=int, nargs="*", help="branches the OS package source offers"
    )
    parser.add_argument(
        "--nvswitch", action="store_true", help="the GPU board has NVSwitch (fabric manager)"
    )
    args = parser.parse_args(argv)
    try:
        choice = select_driver(
            args.models,
            pin=args.pin,
            kernel_modules=args.kernel_modules,
            available_branches=args.available,
            nvswitch=args.nvswitch,
        )
    except DriverRefusal as refusal:
        for problem in refusal.problems:
            print(f"refused: {problem}", file=sys.stderr)
        return 1
    print(json.dumps(None if choice is None else choice.as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
