"""roles/common templates rendered for lab hosts: hosts, networkd, chrony, sysctl, nftables."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from role_render import render, value

CONTAINER = {"common_in_container": True}
BARE_METAL = {"common_in_container": False}


def test_hosts_file_lists_every_plan_host_once_by_mgmt_address(lab_expanded):
    text = render("common", "hosts.j2", lab_expanded, "gpu01")
    for name, host in lab_expanded["hosts"].items():
        assert f"{host['address']}\t{host['fqdn']} {name}" in text.splitlines()
    compute = lab_expanded["hosts"]["gpu01"]["interfaces"]["compute"]["address"]
    assert f"{compute}\tgpu01-compute" in text.splitlines()
    assert "127.0.1.1" not in text


def test_network_file_per_interface_with_address_mtu_and_gateway(lab_expanded):
    interfaces = lab_expanded["hosts"]["gpu01"]["interfaces"]
    mgmt = render(
        "common",
        "network.j2",
        lab_expanded,
        "gpu01",
        {"item": {"key": "mgmt", "value": interfaces["mgmt"]}},
    )
    assert "Name=mgmt" in mgmt
    assert f"Address={interfaces['mgmt']['address']}/24" in mgmt
    assert "Gateway=10.40.0.1" in mgmt
    assert "KeepConfiguration=static" in mgmt
    compute = render(
        "common",
        "network.j2",
        lab_expanded,
        "gpu01",
        {"item": {"key": "compute", "value": interfaces["compute"]}},
    )
    assert "MTUBytes=9000" in compute
    assert "Gateway" not in compute


def test_ntp_server_serves_the_cluster_and_clients_use_it(lab_expanded):
    head = render("common", "chrony.conf.j2", lab_expanded, "head01", CONTAINER)
    assert "server 10.40.0.2 iburst" in head
    assert "allow 10.41.0.0/24" in head
    assert "local stratum 10" in head
    assert "rtcsync" not in head
    client = render("common", "chrony.conf.j2", lab_expanded, "gpu01", BARE_METAL)
    head_address = lab_expanded["hosts"]["head01"]["address"]
    assert f"server {head_address} iburst" in client
    assert "allow" not in client
    assert "rtcsync" in client


def test_a_site_reference_serves_its_own_clock_in_orphan_mode(lab_expanded):
    """The lab plan's cluster.time_reference: head01 serves its own clock when its upstream
    is unreachable, at the plan's stratum; without the option, the plain fallback."""
    assert lab_expanded["cluster"]["time_reference"] == {"stratum": 10}
    lab_expanded["cluster"]["time_reference"] = {"stratum": 8}
    head = render("common", "chrony.conf.j2", lab_expanded, "head01", CONTAINER)
    assert "local stratum 8 orphan" in head.splitlines()
    assert "server 10.40.0.2 iburst" in head  # its upstream, when there is one
    client = render("common", "chrony.conf.j2", lab_expanded, "gpu01", BARE_METAL)
    assert "local" not in client and "orphan" not in client
    del lab_expanded["cluster"]["time_reference"]
    plain = render("common", "chrony.conf.j2", lab_expanded, "head01", CONTAINER)
    assert "local stratum 10" in plain.splitlines() and "orphan" not in plain


def test_several_reference_servers_poll_each_other(lab_expanded):
    lab_expanded["groups"]["ntp_server"] = ["head01", "osd01"]
    head = render("common", "chrony.conf.j2", lab_expanded, "head01", CONTAINER)
    osd = render("common", "chrony.conf.j2", lab_expanded, "osd01", CONTAINER)
    head_address = lab_expanded["hosts"]["head01"]["address"]
    osd_address = lab_expanded["hosts"]["osd01"]["address"]
    assert f"server {osd_address} iburst" in head and f"server {head_address} iburst" not in head
    assert f"server {head_address} iburst" in osd and f"server {osd_address} iburst" not in osd
    assert "local stratum 10 orphan" in head.splitlines() and "local stratum 10 orphan" in osd


def test_without_ntp_servers_every_host_uses_the_plan_upstream(lab_expanded):
    lab_expanded["groups"].pop("ntp_server")
    text = render("common", "chrony.conf.j2", lab_expanded, "gpu01", CONTAINER)
    assert "server 10.40.0.2 iburst" in text


def test_host_wide_sysctls_are_left_out_in_containers(lab_expanded):
    lab = render("common", "sysctl.conf.j2", lab_expanded, "gpu01", CONTAINER)
    assert "net.ipv4.tcp_rmem = 4096 87380 134217728" in lab
    assert "net.core.rmem_max" not in lab
    metal = render("common", "sysctl.conf.j2", lab_expanded, "gpu01", BARE_METAL)
    assert "net.core.rmem_max = 134217728" in metal


def test_unattended_upgrades_follow_the_plan(lab_expanded):
    security = render("common", "52cluster-plan-unattended-upgrades.j2", lab_expanded, "gpu01")
    assert "#clear Unattended-Upgrade::Origins-Pattern;" in security
    assert "label=Debian-Security" in security
    assert 'label=Debian"' not in security
    lab_expanded["packages"]["unattended_upgrades"] = "none"
    off = render("common", "20auto-upgrades.j2", lab_expanded, "gpu01")
    assert 'APT::Periodic::Unattended-Upgrade "0";' in off


def nftables(lab_expanded, host="gpu01") -> str:
    return render("common", "nftables.conf.j2", lab_expanded, host)


def test_firewall_admits_cluster_networks_on_plan_interfaces_and_ssh_from_anywhere(lab_expanded):
    text = nftables(lab_expanded)
    assert "elements = { 10.40.0.0/24, 10.41.0.0/24, 10.42.0.0/24 }" in text
    assert 'iifname { "mgmt", "compute", "storage" } ip saddr @cluster_networks accept' in text
    assert "tcp dport { 22 } accept" in text
    assert "policy drop;" in text
    assert "flush ruleset" not in text  # other tables (the lab's fault injection) stay


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("unshare"),
    reason="needs root, nft and unshare to check the ruleset in a scratch netns",
)
def test_firewall_ruleset_is_valid_nftables(lab_expanded, tmp_path):
    path = tmp_path / "nftables.conf"
    path.write_text(nftables(lab_expanded))
    # A new, empty network namespace: the check loads nothing into the machine's own tables.
    result = subprocess.run(
        ["unshare", "--net", "nft", "-c", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    path.write_text(nftables(lab_expanded).replace("policy drop;", "policy maybe;"))
    result = subprocess.run(
        ["unshare", "--net", "nft", "-c", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode != 0


def test_defaults_follow_the_plan(lab_expanded):
    assert value("common", "common_apt_proxy", lab_expanded, "gpu01") == "http://10.40.0.2:3142"
    assert value("common", "common_unattended_upgrades", lab_expanded, "gpu01") == "security"
    assert value("common", "common_ntp_upstream", lab_expanded, "gpu01") == ["10.40.0.2"]
    assert value("common", "common_hostname", lab_expanded, "infer01") == "infer01"


def test_ceph_and_nfs_ports_only_from_the_networks_the_plan_names(lab_expanded):
    text = nftables(lab_expanded)
    storage = lab_expanded["networks"]["storage"]["cidr"]
    compute = lab_expanded["networks"]["compute"]["cidr"]
    assert (
        "set ceph_sources {\n\t\ttype ipv4_addr\n\t\tflags interval\n"
        f"\t\telements = {{ {storage} }}" in text
    )
    # Ceph's range holds Slurm's 6817/6818 too: only the host's Ceph-network address is guarded.
    address = lab_expanded["hosts"]["gpu01"]["interfaces"]["storage"]["address"]
    assert (
        f"ip daddr {{ {address} }} tcp dport {{ 3300, 6789, 6800-7300 }} "
        "ip saddr != @ceph_sources drop"
    ) in text
    assert f"elements = {{ {compute} }}" in text
    assert "\t\ttcp dport { 2049 } ip saddr != @nfs_sources drop" in text
    # The restriction comes before the rule that admits every plan network.
    assert text.index("@ceph_sources drop") < text.index("@cluster_networks accept")
    # A separate cluster network joins the sources; a plan without storage has no such rule.
    lab_expanded["storage"]["ceph"]["cluster_network"] = "compute"
    assert f"elements = {{ {compute}, {storage} }}" in nftables(lab_expanded)
    del lab_expanded["storage"]
    text = nftables(lab_expanded)
    assert "ceph_sources" not in text
    assert "nfs_sources" not in text


def test_ssh_is_key_only_and_root_logs_in_only_as_ansible_does(lab_expanded):
    # The lab's Ansible logs in as root: root by key, nobody by password.
    lab = render(
        "common", "sshd-cluster-plan.conf.j2", lab_expanded, "gpu01", {"ansible_user": "root"}
    )
    lines = set(lab.splitlines())
    team_users = [u["name"] for t in lab_expanded["teams"].values() for u in t["users"]]
    assert team_users  # the lab plan's teams log in to submit jobs
    assert {"PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            f"AllowUsers {' '.join(['root', *team_users])}"} <= lines  # fmt: skip
    # A real cluster reached as an admin: no root login at all, only the plan's admins.
    lab_expanded["access"]["admin_users"] = [
        {"name": "ops", "ssh_keys": ["ssh-ed25519 AAAA ops"], "sudo": True},
        {"name": "alice", "ssh_keys": ["ssh-ed25519 AAAA alice"], "sudo": False},
    ]
    lab_expanded["teams"] = {}
    real = render(
        "common", "sshd-cluster-plan.conf.j2", lab_expanded, "gpu01", {"ansible_user": "ops"}
    )
    lines = set(real.splitlines())
    head = render(
        "common", "sshd-cluster-plan.conf.j2", lab_expanded, "head01", {"ansible_user": "ops"}
    )
    assert "AllowUsers ops alice borg" in head.splitlines()  # the lab's backup host
    assert {"PermitRootLogin no", "AllowUsers ops alice", "PasswordAuthentication no"} <= lines


@pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="needs sshd to check the file")
def test_ssh_drop_in_is_accepted_by_sshd(lab_expanded, tmp_path):
    text = render(
        "common", "sshd-cluster-plan.conf.j2", lab_expanded, "gpu01", {"ansible_user": "root"}
    )
    conf = tmp_path / "10-cluster-plan.conf"
    conf.write_text(text)
    # -T prints the effective settings: what the node would run with this file.
    key = tmp_path / "host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    if os.geteuid() == 0:  # sshd wants its privilege separation directory, which ssh.service
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # makes: a CI host runs no service
    effective = subprocess.run(
        ["/usr/sbin/sshd", "-T", "-f", str(conf), "-h", str(key)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert effective.returncode == 0, effective.stderr
    settings = set(effective.stdout.splitlines())
    assert {"passwordauthentication no", "permitrootlogin without-password",
            "kbdinteractiveauthentication no"} <= settings  # fmt: skip
    allowed = {u for line in settings if line.startswith("allowusers ") for u in line.split()[1:]}
    assert "root" in allowed
