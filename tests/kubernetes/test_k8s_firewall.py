"""roles/common's firewall on Kubernetes nodes: their pods reach the node's services (the API
server behind its Service, CoreDNS, the kubelet), which a firewall that admits only the plan's
networks on the plan's interfaces would drop; hosts of other plans are left as they were."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "roles"))

from k8s_plans import expanded_plan
from role_render import render

POD_RULE = (
    'iifname { "mgmt", "compute", "veth*", "cali*", "tunl0", "vxlan.calico" } '
    "ip saddr { 10.244.0.0/16 } accept"
)


def nftables(plan: str, host: str) -> str:
    return render("common", "nftables.conf.j2", expanded_plan(plan), host)


@pytest.mark.parametrize("host", ["cp01", "gpu01", "cpu01"])
def test_kubernetes_nodes_admit_their_pod_network(host):
    text = nftables("lab-k8s", host)
    assert POD_RULE in text
    # after the drops of the services some networks may not reach
    assert text.index("@cluster_networks accept") < text.index(POD_RULE)


def test_hosts_of_a_slurm_plan_admit_no_pod_network():
    from cluster_plan.api import load_expanded

    slurm = load_expanded(str(Path(__file__).resolve().parents[2] / "inventory/lab/cluster.yml"))
    text = render("common", "nftables.conf.j2", slurm, "gpu01")
    assert "10.244.0.0/16" not in text and "veth*" not in text


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("unshare"),
    reason="needs root, nft and unshare to check the ruleset in a scratch netns",
)
def test_the_firewall_with_the_pod_network_is_valid_nftables(tmp_path):
    path = tmp_path / "nftables.conf"
    path.write_text(nftables("lab-k8s", "gpu01"))
    result = subprocess.run(
        ["unshare", "--net", "nft", "-c", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
