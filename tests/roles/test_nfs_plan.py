"""roles/nfs offline: the plan's exports as Ganesha serves them, who mounts them, and the
rendered ganesha.conf and mount units."""

from __future__ import annotations

from pathlib import Path

from role_render import render

from cluster_plan.storage import ceph, nfs
from cluster_plan.storage.mounts import systemd_mount_unit

ROOT = Path(__file__).resolve().parents[2]


def test_exports_carry_backend_served_path_and_network(lab_expanded):
    exports = nfs.nfs_exports(lab_expanded)
    assert [e["pseudo"] for e in exports] == ["/srv/home", "/srv/software"]
    home = exports[0]
    assert home == {
        "id": 1,
        "pseudo": "/srv/home",
        "backend": "cephfs",
        "path": "/volumes/nfs_srv_home",
        "network": "compute",
        "clients": lab_expanded["networks"]["compute"]["cidr"],
        "mount": "/home/shared",
    }
    # roles/ceph makes exactly the subvolume groups roles/nfs serves.
    groups = ceph.ceph_nfs_groups(lab_expanded)
    assert [e["path"] for e in exports] == [f"/volumes/{g}" for g in groups]
    lab_expanded["storage"]["nfs"]["exports"][0]["backend"] = "vfs"
    assert nfs.nfs_exports(lab_expanded)[0]["path"] == "/srv/home"


def test_hosts_on_the_export_network_mount_it_the_server_does_not(lab_expanded):
    hosts = lab_expanded["hosts"]
    server = lab_expanded["storage"]["nfs"]["server"]
    assert nfs.nfs_client_mounts(lab_expanded, hosts[server]) == []
    assert [m["mount"] for m in nfs.nfs_client_mounts(lab_expanded, hosts["gpu01"])] == [
        "/home/shared",
        "/opt/software",
    ]
    off_network = next(h for h in hosts.values() if "compute" not in h["interfaces"])
    assert nfs.nfs_client_mounts(lab_expanded, off_network) == []


def test_ganesha_conf_serves_nfsv4_to_the_export_network_only(lab_expanded):
    server = lab_expanded["storage"]["nfs"]["server"]
    text = render("nfs", "ganesha.conf.j2", lab_expanded, server)
    assert "Protocols = 4;" in text and "Enable_NLM = false;" in text
    assert text.count("EXPORT {") == 2
    assert 'Path = "/volumes/nfs_srv_home";' in text and 'Pseudo = "/srv/home";' in text
    assert "Access_Type = None;" in text  # nobody but the CLIENT block's network
    assert f"Clients = {lab_expanded['networks']['compute']['cidr']};" in text
    assert "Name = CEPH;" in text and f'User_Id = "nfs.{server}";' in text
    assert "Squash = root_squash;" in text


def test_mount_unit_of_an_export(lab_expanded):
    server = lab_expanded["storage"]["nfs"]["server"]
    mounts = nfs.nfs_client_mounts(lab_expanded, lab_expanded["hosts"]["gpu01"])
    text = render("nfs", "nfs.mount.j2", lab_expanded, "gpu01", {"item": mounts[0]})
    address = lab_expanded["hosts"][server]["interfaces"]["compute"]["address"]
    assert f"What={address}:/srv/home" in text
    assert "Type=nfs4" in text and "Where=/home/shared" in text
    # the unit name comes from the filter both storage roles use (cluster_plan.storage.mounts)
    assert systemd_mount_unit("/home/shared") == "home-shared.mount"


def plan_without_storage(expanded):
    """The lab plan with no Ceph and no NFS, as the defaults table leaves such a plan."""
    expanded["storage"]["ceph"] = None
    expanded["storage"]["nfs"] = None
    for dataset in expanded["scheduler"]["datasets"].values():
        dataset["pool"] = None
    return expanded


def test_every_storage_default_templates_for_plans_with_and_without_storage(lab_expanded):
    """The roles run on every host of every plan (site.yml targets all): their defaults must
    template where the plan has no Ceph or NFS too, and then ask for nothing."""
    import copy

    import yaml
    from role_render import value

    for plan in (copy.deepcopy(lab_expanded), plan_without_storage(copy.deepcopy(lab_expanded))):
        for role in ("ceph", "nfs", "common"):
            defaults = yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text())
            for host in ("head01", "gpu01", "stor01"):
                for name in defaults:
                    value(role, name, plan, host)  # raises on an undefined attribute
    bare = plan_without_storage(lab_expanded)
    assert value("ceph", "ceph_pools", bare, "stor01") == []
    assert value("ceph", "ceph_cephfs", bare, "stor01") is None
    assert value("nfs", "nfs_exports", bare, "head01") == []
    restricted = value("common", "common_firewall_restricted_services", bare, "head01")
    # no storage service; node_exporter stays, open to the monitoring server only
    assert [s["name"] for s in restricted] == ["node_exporter"]
    assert restricted[0]["sources"] == ["10.40.0.10/32"]
