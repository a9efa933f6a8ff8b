"""Driver selection: the newest branch covering every model, pins, flavours, refusals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_plan.gpu.driver_select import (
    DriverRefusal,
    choice_for_host,
    main,
    select_driver,
)
from cluster_plan.plan import catalog as accelerator_catalog

NVIDIA_MODELS = sorted(
    m for m, e in accelerator_catalog.load_catalog().items() if e["vendor"] == "nvidia"
)


def test_h100_sxm_gets_newest_branch_with_fabric_manager() -> None:
    choice = select_driver(["H100-SXM5-80GB"], nvswitch=True)
    assert choice is not None
    assert choice.branch == max(accelerator_catalog.driver_branches())
    assert choice.fabric_manager is True
    assert choice.kernel_modules == "open"  # Hopper supports them; default from R560
    assert choice.pinned is False


@pytest.mark.parametrize(
    ("accelerators", "fabric_manager"),
    [
        ({"model": "H100-SXM5-80GB", "count": 8}, True),  # HGX H100 8-GPU: NVSwitch
        ({"model": "H100-SXM5-80GB", "count": 4}, False),  # HGX H100 4-GPU: direct NVLink
        ({"model": "A100-SXM4-80GB", "count": 4}, False),
        ({"model": "A100-SXM4-40GB", "count": 8}, True),
        ({"model": "V100-SXM2-32GB", "count": 8}, False),  # DGX-1: NVLink cube mesh
        ({"model": "V100-SXM2-32GB", "count": 16}, True),  # DGX-2: NVSwitch
        ({"model": "H200-SXM-141GB", "count": 8}, True),
        ({"model": "B200", "count": 8}, True),
        ({"model": "H100-PCIE-80GB", "count": 8}, False),
        # the plan's word wins over the catalog's default, either way
        ({"model": "H100-SXM5-80GB", "count": 8, "nvswitch": False}, False),
        ({"model": "H100-SXM5-80GB", "count": 4, "nvswitch": True}, True),
    ],
)
def test_fabric_manager_follows_the_board(
    accelerators: dict[str, Any], fabric_manager: bool
) -> None:
    choice = choice_for_host(accelerators)
    assert choice["install"] is True and choice["refusal"] is None
    assert choice["fabric_manager"] is fabric_manager


def test_l40s_needs_no_fabric_manager() -> None:
    choice = select_driver(["L40S"])
    assert choice is not None
    assert choice.fabric_manager is False


def test_generic_accelerator_installs_nothing() -> None:
    assert select_driver(["tpu"]) is None
    assert choice_for_host({"model": "tpu", "count": 4})["install"] is False
    assert choice_for_host(None)["install"] is False


def test_unknown_model_is_refused_by_name() -> None:
    with pytest.raises(DriverRefusal, match="'H900' is not in the accelerator catalog"):
        select_driver(["H900"])


def test_blackwell_requires_open_modules() -> None:
    choice = select_driver(["B200"])
    assert choice is not None and choice.kernel_modules == "open"
    with pytest.raises(DriverRefusal, match="requires the open kernel modules"):
        select_driver(["B200"], kernel_modules="proprietary")


def test_volta_is_capped_and_proprietary() -> None:
    choice = select_driver(["V100-SXM2-32GB"])
    assert choice is not None
    assert choice.branch == 580
    assert choice.kernel_modules == "proprietary"


def test_volta_and_blackwell_cannot_share_a_host() -> None:
    with pytest.raises(DriverRefusal, match="B200 need the open kernel modules"):
        select_driver(["V100-SXM2-32GB", "B200"])


def test_pin_too_old_is_refused_with_model_and_minimum() -> None:
    with pytest.raises(DriverRefusal) as err:
        select_driver(["H200-SXM-141GB"], pin=535)
    assert "older than H200-SXM-141GB's minimum branch 550" in str(err.value)


def test_pin_unknown_branch_lists_known_ones() -> None:
    with pytest.raises(DriverRefusal, match=r"not a known driver branch \(known: 535, 550"):
        select_driver(["L40S"], pin=999)


def test_pin_accepted_and_flavour_follows_branch() -> None:
    choice = select_driver(["L40S"], pin=535)
    assert choice is not None
    assert (choice.branch, choice.pinned, choice.kernel_modules) == (535, True, "proprietary")


def test_os_offer_limits_the_choice() -> None:
    choice = select_driver(["H100-SXM5-80GB"], available_branches=[535])
    assert choice is not None and choice.branch == 535
    with pytest.raises(DriverRefusal, match="no driver branch offered for Debian 12"):
        select_driver(["B200"], available_branches=[535], source_name="Debian 12")
    with pytest.raises(DriverRefusal, match="not packaged for Debian 12"):
        select_driver(["L40S"], pin=580, available_branches=[535], source_name="Debian 12")


def test_choice_for_host_reports_refusal_instead_of_raising() -> None:
    result = choice_for_host({"model": "H200-SXM-141GB", "count": 8}, pin=535)
    assert result["install"] is False
    assert "minimum branch 550" in result["refusal"]


def test_synthetic_catalog_every_problem_reported() -> None:
    catalog: dict[str, dict[str, Any]] = {
        "old": {
            "vendor": "nvidia",
            "architecture": "a",
            "min_driver_branch": 100,
            "max_driver_branch": 200,
            "open_kernel_modules": "unsupported",
        },
        "new": {
            "vendor": "nvidia",
            "architecture": "b",
            "min_driver_branch": 300,
            "max_driver_branch": None,
            "open_kernel_modules": "required",
        },
    }
    branches = {200: {"architectures": ["a"]}, 300: {"architectures": ["a", "b"]}}
    with pytest.raises(DriverRefusal) as err:
        select_driver(["old", "new"], pin=200, catalog=catalog, branches=branches)
    problems = err.value.problems
    assert any("older than new's minimum branch 300" in p for p in problems)
    assert any("cannot use" in p for p in problems)


def test_cli_prints_choice_and_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["L40S"]) == 0
    assert '"branch": 580' in capsys.readouterr().out
    assert main(["H200-SXM-141GB", "--pin", "535"]) == 1
    assert "refused: pinned branch 535" in capsys.readouterr().err
    assert main(["H100-SXM5-80GB"]) == 0
    assert '"fabric_manager": false' in capsys.readouterr().out
    assert main(["H100-SXM5-80GB", "--nvswitch"]) == 0
    assert '"fabric_manager": true' in capsys.readouterr().out


@given(
    models=st.lists(st.sampled_from(NVIDIA_MODELS), min_size=1, max_size=3),
    offered=st.sets(st.sampled_from(sorted(accelerator_catalog.driver_branches()))),
)
def test_choice_is_the_newest_offered_branch_covering_all(
    models: list[str], offered: set[int]
) -> None:
    catalog = accelerator_catalog.load_catalog()
    branches = accelerator_catalog.driver_branches()

    def covers(branch: int, model: str) -> bool:
        entry = catalog[model]
        return (
            entry["architecture"] in branches[branch]["architectures"]
            and entry["min_driver_branch"] <= branch
            and (entry.get("max_driver_branch") is None or branch <= entry["max_driver_branch"])
        )

    good = [b for b in sorted(offered) if all(covers(b, m) for m in models)]
    try:
        choice = select_driver(models, available_branches=offered)
    except DriverRefusal as refusal:
        flavours = {catalog[m]["open_kernel_modules"] for m in models}
        assert not good or {"required", "unsupported"} <= flavours, refusal.problems
        return
    assert choice is not None
    assert choice.branch == good[-1]
    assert choice.fabric_manager is False  # NVSwitch is the board's, not the models'
    with_switch = select_driver(models, available_branches=offered, nvswitch=True)
    assert with_switch is not None and with_switch.fabric_manager is True
