"""Drift judged offline: facts of a converged lab (as the facts' parsers return them) give
no finding; each change gives exactly one finding, on the host it was made on."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.api import load_expanded
from cluster_plan.day2.drift.checks import drift_findings, expected_records, slurm_view_host
from cluster_plan.day2.remote.session import HostFacts
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.slurm.policy import slurm_node_records

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "inventory" / "lab" / "cluster.yml"
RULES = "table inet cluster_plan {\n\tchain input {\n\t\ttcp dport { 22 } accept\n\t}\n}"
SUM = "a" * 64


@pytest.fixture(scope="module")
def expanded() -> ExpandedPlan:
    return load_expanded(PLAN)


def converged(expanded: ExpandedPlan) -> dict[str, HostFacts]:
    """What every lab host shows right after site.yml."""
    results = {}
    compute = [dict(expanded["hosts"][h]) for h in expanded["groups"]["slurm_compute"]]
    for name, host in expanded["hosts"].items():
        links = {
            i["device"]: {"mtu": i["mtu"], "up": True,
                          "addresses": [f"{i['address']}/{i['prefixlen']}"]}
            for i in host["interfaces"].values()
        }  # fmt: skip
        links["lo"] = {"mtu": 65536, "up": True, "addresses": ["127.0.0.1/8"]}
        gateway = next(i for i in host["interfaces"].values() if i["gateway"])
        manifests: dict[str, Any] = {
            "common": {
                "files": {"/etc/hosts": SUM},
                "services": ["chrony", "ssh"],
                "nftables": {"inet cluster_plan": RULES},
            },
            "backup": {"files": {}, "services": ["cluster-plan-backup.timer"]},
        }
        units = {u: {"id": u, "load": "loaded", "active": "active", "sub": "running"}
                 for u in ("chrony", "ssh", "cluster-plan-backup.timer")}  # fmt: skip
        sums = {"/etc/hosts": SUM}
        if "slurm" in expected_records(expanded, name):
            daemon = "slurmctld" if "slurm_controller" in host["roles"] else "slurmd"
            manifests["slurm"] = {
                "files": {"/etc/slurm/slurm.conf": SUM},
                "services": ["munge", daemon],
                "held_packages": {"slurm-client": "22.05.8-4+deb12u3"},
            }
            units.update({u: {"id": u, "load": "loaded", "active": "active", "sub": "running"}
                          for u in ("munge", daemon)})  # fmt: skip
            sums["/etc/slurm/slurm.conf"] = SUM
        facts: dict[str, Any] = {
            "hostname": host["hostname"],
            "links": links,
            "default_routes": [{"gateway": gateway["gateway"], "device": gateway["device"]}],
            "manifests": manifests,
            "checksums": sums,
            "units": units,
            "packages": {"slurm-client": {"version": "22.05.8-4+deb12u3", "selection": "hold",
                                          "status": "installed"}},
            "nftables": {"inet cluster_plan": RULES},
        }  # fmt: skip
        if name == slurm_view_host(expanded):
            facts["slurm_nodes"] = {
                r["name"]: {"state": "IDLE", "flags": [], "features": sorted(r["features"]),
                            "active_features": sorted(r["features"]), "gres": r["gres"] or "",
                            "reason": None}
                for r in slurm_node_records(compute)
            }  # fmt: skip
        results[name] = HostFacts(True, facts)
    return results


def test_a_converged_cluster_has_no_drift(expanded: ExpandedPlan) -> None:
    assert drift_findings(expanded, converged(expanded)) == []


def test_six_hand_changes_are_six_findings_on_the_right_hosts(expanded: ExpandedPlan) -> None:
    results = converged(expanded)
    cpu = results["cpu01"].facts
    compute_dev = expanded["hosts"]["cpu01"]["interfaces"]["compute"]["device"]
    cpu["links"][compute_dev]["addresses"] = ["10.41.0.99/24"]
    stor = results["stor01"].facts
    stor["links"][expanded["hosts"]["stor01"]["interfaces"]["storage"]["device"]]["mtu"] = 1500
    results["gpu02"].facts["units"]["slurmd"].update(active="inactive", sub="dead")
    # Slurm soon marks the node not responding: explained by the stopped slurmd
    controller = results["head01"].facts["slurm_nodes"]
    controller["gpu02"].update(state="IDLE", flags=["NOT_RESPONDING"])
    results["infer01"].facts["checksums"]["/etc/slurm/slurm.conf"] = "b" * 64
    results["gpu01"].facts["packages"]["slurm-client"]["selection"] = "install"
    results["stor02"].facts["nftables"]["inet cluster_plan"] = RULES.replace(
        "\t}\n}", "\t\ttcp dport 9999 accept\n\t}\n}"
    )
    found = drift_findings(expanded, results)
    assert [(f.host, f.check, f.subject) for f in found] == [
        ("cpu01", "address", "compute"),
        ("gpu01", "package-hold", "slurm-client"),
        ("gpu02", "service", "slurmd"),
        ("infer01", "file", "/etc/slurm/slurm.conf"),
        ("stor01", "mtu", "storage"),
        ("stor02", "nftables", "inet cluster_plan"),
    ]
    rendered = [f.render() for f in found]
    assert rendered[0].startswith("cpu01: address compute: expected 10.41.0.")
    assert rendered[0].endswith(", found 10.41.0.99/24")
    assert rendered[2] == "gpu02: service slurmd: expected active, found inactive (dead)"
    assert rendered[4] == "stor01: mtu storage: expected 9000, found 1500"
    assert rendered[5].endswith("found + tcp dport 9999 accept")
    assert "not held (install)" in rendered[1]


def test_an_unreachable_host_is_one_finding_with_the_reason(expanded: ExpandedPlan) -> None:
    results = converged(expanded)
    results["gpu02"] = HostFacts(False, reason="timed out")
    results["head01"].facts["slurm_nodes"]["gpu02"].update(state="DOWN", reason="Not responding")
    found = drift_findings(expanded, results)
    assert [f.render() for f in found] == [
        "gpu02: unreachable: expected an SSH session, found timed out"
    ]


def test_slurms_view_is_reported_on_the_node_it_is_about(expanded: ExpandedPlan) -> None:
    results = converged(expanded)
    nodes = results["head01"].facts["slurm_nodes"]
    nodes["gpu01"].update(state="IDLE", flags=["DRAIN"], reason="maintenance")
    nodes["gpu02"]["gres"] = "gpu:h100:1(S:0)"
    nodes["infer01"]["features"] = ["pool_accel"]
    del nodes["cpu01"]
    found = {(f.host, f.check): f.found for f in drift_findings(expanded, results)}
    assert found == {
        ("gpu01", "slurm-state"): "IDLE+DRAIN (maintenance)",
        ("gpu02", "slurm-gres"): "gpu:h100:1",
        ("infer01", "slurm-features"): "pool_accel",
        ("cpu01", "slurm-node"): "unknown",
    }


def test_a_missing_record_or_unreadable_fact_is_drift(expanded: ExpandedPlan) -> None:
    results = converged(expanded)
    del results["stor03"].facts["manifests"]["backup"]
    results["stor03"].errors["links"] = "ip -j addr: not JSON (Expecting value)"
    results["cpu01"].facts["default_routes"] = []
    found = [f.render() for f in drift_findings(expanded, results)]
    assert found == [
        "cpu01: default-route: expected via 10.40.0.1 dev mgmt, found no default route",
        "stor03: fact links: expected readable output, found ip -j addr: not JSON "
        "(Expecting value)",
        "stor03: manifest backup: expected the backup role's record, found none (not converged?)",
    ]


def test_the_management_link_may_carry_more_addresses(expanded: ExpandedPlan) -> None:
    results = converged(expanded)
    mgmt = expanded["hosts"]["gpu01"]["interfaces"]["mgmt"]["device"]
    results["gpu01"].facts["links"][mgmt]["addresses"].append("10.40.0.250/24")
    assert drift_findings(expanded, results) == []
    results["gpu01"].facts["links"][mgmt]["addresses"] = ["10.40.0.250/24"]
    assert [f.check for f in drift_findings(expanded, results)] == ["address"]


def test_expected_records_follow_the_hosts_roles(expanded: ExpandedPlan) -> None:
    assert expected_records(expanded, "head01") == ["common", "slurm", "backup"]
    assert expected_records(expanded, "stor01") == ["common", "backup"]
    plain = copy.deepcopy(expanded)
    plain["backups"] = None
    assert expected_records(plain, "stor01") == ["common"]
