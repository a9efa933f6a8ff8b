"""The good-plan corpus: plans written the way operators write them, which must stay free of
findings. Realistic plans (a university lab, mixed GPU generations, a brownfield cluster with
pinned legacy nodes, an all-in-one box, 512 H100 nodes, a Kubernetes edge site) and plans that
are fine but unusual (`unusual-*.yml`, each base.yml with one unusual choice, its header says
which). A new check that fires on one of them is a false positive.

Each plan goes the user's way: validate (--strict: not even a warning), lock, then expand;
what the roles would read is checked against the plan where a check exists for it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli_output import result

from cluster_plan import cli
from cluster_plan.api import load_expanded
from cluster_plan.gpu.driver_select import choice_for_host

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GOOD = HERE / "good"
PLANS = sorted(GOOD.glob("*.yml"))
REALISTIC = [p for p in PLANS if not p.name.startswith("unusual-")]


def plan_id(plan: Path) -> str:
    return plan.stem


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_the_corpus_is_large():
    assert len(REALISTIC) >= 6
    assert len(PLANS) - len(REALISTIC) >= 26
    for plan in PLANS:
        first = plan.read_text().splitlines()[0]
        # every plan says what it is (or what is unusual about it) at the top
        assert first.startswith("# "), plan.name


@pytest.mark.parametrize("plan", PLANS, ids=plan_id)
def test_good_plan_validates_without_a_finding(capsys, plan):
    code, out, _ = run_cli(
        capsys, "validate", "--no-lock", "--strict", "--format", "json", str(plan)
    )
    (report,) = result(out)
    shown = [
        (f["code"], f["path"], f["message"]) for f in report["findings"] if not f["suppressed_by"]
    ]
    assert shown == []
    assert code == 0
    # a suppression carries its reason
    assert all(len(f["suppressed_by"]) > 10 for f in report["findings"])


def test_good_plans_pass_check_jsonschema():
    exe = ROOT / ".venv" / "bin" / "check-jsonschema"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "check_jsonschema"]
    proc = subprocess.run(
        [*command, "--schemafile", str(ROOT / "schemas" / "cluster-plan.schema.json"),
         *map(str, PLANS)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every good plan copied and locked, as its user would commit it."""
    folder = tmp_path_factory.mktemp("good")
    out = {}
    for plan in PLANS:
        copy = folder / plan.name
        shutil.copy(plan, copy)
        assert cli.main(["lock", str(copy)]) == 0, plan.name
        out[plan.stem] = copy
    return out


@pytest.mark.parametrize("plan", PLANS, ids=plan_id)
def test_good_plan_locks_and_expands(capsys, locked, plan):
    copy = locked[plan.stem]
    code, _, _ = run_cli(capsys, "validate", "--strict", str(copy))
    assert code == 0
    expanded = load_expanded(copy)
    data: dict[str, Any] = yaml.safe_load(plan.read_text())
    counts = sum(g["count"] for g in data["node_groups"].values())
    assert len(expanded["hosts"]) == counts
    for name, host in expanded["hosts"].items():
        profile = expanded["hardware"][host["hardware_profile"]]
        nics = {nic["name"] for nic in profile["nics"]}
        for net, interface in host["interfaces"].items():
            # a profile that lists its NICs gives every interface one of them
            assert interface["device"] in (nics or {net}), (name, net)
        names = [d["name"] for d in host["disks"]]
        assert len(names) == len(set(names)), name


# (profile -> fabric manager) where the board, not the model, decides
FABRIC_MANAGER = {
    "mixed-generations": {
        "dgx1-v100": False,  # 8x V100 SXM2 in a cube mesh
        "hgx-a100-4": False,  # 4-GPU HGX: direct NVLink
        "hgx-a100-8": True,
        "hgx-h100": True,
        "l40s-box": False,
    },
    "university-lab": {"dgx1": False},
    "h100-512": {"hgx-h100": True},
    "unusual-nvswitch-explicit": {"gpu-h100": False, "gpu-h100x4": True},
}


@pytest.mark.parametrize("name", sorted(FABRIC_MANAGER))
def test_fabric_manager_follows_the_board(locked, name):
    expanded = load_expanded(locked[name])
    found = {}
    for host in expanded["hosts"].values():
        choice = choice_for_host(host["accelerators"], pin=host["accelerators"]["driver_branch"]) \
            if host["accelerators"] else None  # fmt: skip
        if choice is not None and choice["install"]:
            assert choice["refusal"] is None
            found[host["hardware_profile"]] = choice["fabric_manager"]
    assert found == FABRIC_MANAGER[name]
