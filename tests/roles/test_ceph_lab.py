"""Storage from the plan, proven on the lab after `site.yml`: a real Ceph cluster (Debian
12's 16.2) with its CephFS, the NAS exports, and what must hold when things go wrong.

The lab is the session lab, converged once per session by `converged_lab`
(support.lab_session), shared with the Slurm tests. Read-only checks come first;
tests marked `lab_changes` (a storage node down, a monitor stopped, bad disks) restore what
they change and run after every read-only test of the session. A storage node added and
removed by `cluster-plan change` is proven in tests/roles/test_change_lab.py.
Every command runs inside lab namespaces (nsenter into nodes, or a namespace of our own
cabled to the lab's bridges).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lab_helpers import (
    OUTSIDE,
    PLAN,
    WRITE_FILES,
    ceph_json,
    cli,
    connect_script,
    on_node,
    osd_hosts,
    outside_namespace,
    probe_from_namespace,
    ssh_reachable,
)

# The shared session fixtures (`lab`, `converged_lab`), requested by `ceph` below.
from support.lab_session import FULL_RUN, Converged, converged_lab, lab  # noqa: F401
from support.playbooks import changed_lines, playbook, recap

from cluster_plan.lab.names import for_plan

pytestmark = pytest.mark.lab

HEALTH_TIMEOUT_S = 600
# The bad-disk proof needs a block device node of a host loop device inside an OSD node; on
# this machine `nsenter -t INIT -m -r mknod /dev/cp-baddiskN b 7 N` exits 1 in the merged lab
# (2026-11-30, two runs), so the proof runs on request until the fixture makes its node the
# way the lab makes the OSD disks (cluster_plan/lab/node.py, at boot).
OBJECTS = 200
FILES = 20  # per directory: the shared tree and a dataset path


@dataclass
class CephLab:
    expanded: dict[str, Any]
    converged: Converged

    def sh(self, host: str, script: str, timeout: float = 300) -> str:
        result = on_node(host, script, timeout=timeout)
        assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def group(self, name: str) -> list[str]:
        return list(self.expanded["groups"].get(name, []))

    @property
    def admin(self) -> str:
        """The first monitor: it holds the admin key."""
        return self.group("ceph_mon")[0]

    def ceph(self, command: str, host: str = "") -> Any:
        return ceph_json(host or self.admin, command)

    def osd_hosts(self) -> dict[int, str]:
        """OSD id -> host, from `ceph osd tree`."""
        return osd_hosts(self.ceph("osd tree"))

    def storage_address(self, host: str) -> str:
        return str(self.expanded["hosts"][host]["interfaces"]["storage"]["address"])

    def planned_osds(self) -> dict[str, int]:
        """OSD host -> number of planned OSD disks."""
        hosts = self.expanded["hosts"]
        return {
            h: sum(1 for d in hosts[h]["disks"] if d.get("use") == "osd")
            for h in self.group("ceph_osd")
        }

    def wait_health_ok(self, timeout: float = HEALTH_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        health: dict[str, Any] = {}
        while time.monotonic() < deadline:
            health = self.ceph("health detail")
            if health["status"] == "HEALTH_OK":
                return health
            time.sleep(5)
        pytest.fail(f"not HEALTH_OK after {timeout:.0f}s: {json.dumps(health)[:3000]}")


@pytest.fixture
def ceph(converged_lab: Converged) -> CephLab:  # noqa: F811
    converged_lab.require_converged()
    return CephLab(converged_lab.expanded, converged_lab)


# --- after site.yml -------------------------------------------------------------------------


def test_quorum_manager_osds_up_and_in_and_health_ok(ceph: CephLab):
    quorum = ceph.ceph("quorum_status")
    assert sorted(quorum["quorum_names"]) == ceph.group("ceph_mon")
    mgr = ceph.ceph("mgr stat")
    assert mgr["available"] is True and mgr["active_name"] in ceph.group("ceph_mgr")
    planned = ceph.planned_osds()
    placed = ceph.osd_hosts()
    assert {h: list(placed.values()).count(h) for h in planned} == planned
    dump = ceph.ceph("osd dump")
    assert len(dump["osds"]) == sum(planned.values())
    assert all(o["up"] == 1 and o["in"] == 1 for o in dump["osds"]), dump["osds"]
    ceph.wait_health_ok()
    pgs = ceph.ceph("pg stat")
    states = {s["name"]: s["num"] for s in pgs["pg_summary"]["num_pg_by_state"]}
    assert states == {"active+clean": pgs["pg_summary"]["num_pgs"]}


def test_crush_tree_follows_the_plan_racks(ceph: CephLab):
    tree = ceph.ceph("osd crush tree")
    by_id = {n["id"]: n for n in tree["nodes"]}
    default = next(n for n in tree["nodes"] if n["name"] == "default")
    racks = {by_id[c]["name"]: by_id[c] for c in default["children"]}
    assert all(r["type"] == "rack" for r in racks.values())
    hosts = ceph.expanded["hosts"]
    expected: dict[str, set[str]] = {}
    for host in ceph.group("ceph_osd"):
        expected.setdefault(hosts[host]["rack"], set()).add(host)
    assert {rack: {by_id[c]["name"] for c in node["children"]} for rack, node in racks.items()} == (
        expected
    )


def test_pools_carry_the_planned_settings_and_rules(ceph: CephLab):
    pools = {p["pool_name"]: p for p in ceph.ceph("osd pool ls detail")}
    rules = {r["rule_id"]: r["rule_name"] for r in ceph.ceph("osd crush rule dump")}
    ceph_plan = ceph.expanded["storage"]["ceph"]
    dataset_pools = {d.get("pool") for d in ceph.expanded["scheduler"]["datasets"].values()}
    for planned in ceph_plan["pools"]:
        pool = pools[planned["name"]]
        assert pool["size"] == planned["size"], planned["name"]
        assert pool["min_size"] == planned.get("min_size", planned["size"] - planned["size"] // 2)
        assert pool["pg_autoscale_mode"] == planned.get("autoscale", "on")
        if planned.get("autoscale") == "off":
            assert pool["pg_num"] == planned["pg_num"]
        assert planned.get("application", "rbd") in pool["application_metadata"]
        rule = rules[pool["crush_rule"]]
        if planned["name"] in dataset_pools:
            assert rule == f"dataset_{planned['name']}"
        else:
            assert rule == f"replicated_{ceph_plan.get('failure_domain', 'host')}"


def dataset_osds(cluster: CephLab, dataset: str) -> set[int]:
    racks = cluster.expanded["scheduler"]["datasets"][dataset]["racks"]
    hosts = cluster.expanded["hosts"]
    return {osd for osd, host in cluster.osd_hosts().items() if hosts[host]["rack"] in racks}


def test_dataset_pool_places_every_replica_in_the_dataset_racks(ceph: CephLab):
    dataset, spec = next(
        (n, d) for n, d in ceph.expanded["scheduler"]["datasets"].items() if d.get("pool")
    )
    inside = dataset_osds(ceph, dataset)
    assert inside and inside != set(ceph.osd_hosts()), "the test needs OSDs outside the racks"
    listing = ceph.ceph(f"pg ls-by-pool {spec['pool']}")
    pgs = listing["pg_stats"] if isinstance(listing, dict) else listing
    assert len(pgs) == next(
        p["pg_num"] for p in ceph.expanded["storage"]["ceph"]["pools"] if p["name"] == spec["pool"]
    )
    for pg in pgs:
        assert set(pg["acting"]) <= inside, pg["pgid"]
        assert len(set(pg["acting"])) == next(
            p["size"]
            for p in ceph.expanded["storage"]["ceph"]["pools"]
            if p["name"] == spec["pool"]
        )
    # A file written through a client's dataset path lands in that pool, on those OSDs.
    client = ceph.group("slurm_compute")[0]
    inode = ceph.sh(
        client,
        f"head -c 1048576 /dev/urandom > {spec['path']}/placement.bin && sync && "
        f"stat -c %i {spec['path']}/placement.bin",
    ).strip()
    pool = ceph.sh(
        client,
        f"python3 -c \"import os; print(os.getxattr('{spec['path']}/placement.bin', "
        "'ceph.file.layout.pool').decode())\"",
    ).strip()
    assert pool == spec["pool"]
    mapping = ceph.ceph(f"osd map {spec['pool']} {int(inode):x}.00000000")
    assert set(mapping["acting"]) <= inside, mapping


def test_cephfs_is_mounted_on_every_client_with_the_dataset_paths(ceph: CephLab):
    fs = ceph.expanded["storage"]["ceph"]["cephfs"]
    status = ceph.ceph(f"fs status {fs['name']}")
    states = sorted(m["state"] for m in status["mdsmap"])
    assert states == ["active"] + ["standby"] * (len(ceph.group("ceph_mds")) - 1)
    datasets = {n: d for n, d in ceph.expanded["scheduler"]["datasets"].items() if d.get("pool")}
    for client in ceph.group("slurm_compute"):
        mounts = ceph.sh(client, "findmnt -n -o FSTYPE,TARGET --target " + fs["mount"])
        assert mounts.split() == ["fuse.ceph-fuse", fs["mount"]], client
        for name, dataset in datasets.items():
            target = ceph.sh(client, f"readlink {dataset['path']}").strip()
            assert target.startswith(f"{fs['mount']}/volumes/datasets/{name}/"), target


def key_material(cluster: CephLab) -> list[str]:
    """Every cephx key of the cluster (read on the first monitor)."""
    entries = cluster.ceph("auth ls")["auth_dump"]
    return [e["key"] for e in entries]


def test_keyrings_are_private_and_no_key_is_ever_printed(ceph: CephLab):
    keys = key_material(ceph)
    assert len(keys) >= 10
    for host in ceph.expanded["hosts"]:
        found = ceph.sh(
            host,
            "find /etc/ceph /var/lib/ceph -name '*keyring*' -type f -printf '%m %u %p\\n' "
            "2>/dev/null; stat -c '%a %n' /etc/ceph/cluster-plan 2>/dev/null; true",
        )
        for line in found.splitlines():
            mode, path = line.split()[0], line.split()[-1]
            if path == "/etc/ceph/cluster-plan":
                assert mode == "700", (host, line)
                continue
            # 0600 or stricter: nobody but the owner.
            assert int(mode, 8) & 0o177 == 0, (host, line)
    first, second = ceph.converged.require_runs()
    for output in (first.output, second.output):
        for key in keys:
            assert key not in output
            assert key[:20] not in output


def test_client_key_reaches_only_its_file_system(ceph: CephLab):
    client = ceph.group("slurm_compute")[0]
    rados = f"rados --id {client}"
    fs = ceph.expanded["storage"]["ceph"]["cephfs"]
    # Its file system's data pool: allowed (the control: the key works at all).
    ceph.sh(client, f"{rados} -p {fs['data_pool']} put caps-probe /etc/hostname")
    ceph.sh(client, f"{rados} -p {fs['data_pool']} rm caps-probe")
    fs_map = ceph.ceph(f"fs get {fs['name']}")["mdsmap"]
    pool_names = {p["pool_id"]: p["pool_name"] for p in ceph.ceph("osd pool ls detail")}
    data_pools = {pool_names[i] for i in fs_map["data_pools"]}
    # Pools that are not the file system's data pools: its metadata pool, the rbd pool.
    outside = [
        p["name"] for p in ceph.expanded["storage"]["ceph"]["pools"] if p["name"] not in data_pools
    ]
    assert fs["metadata_pool"] in outside and len(outside) >= 2
    for pool in outside:
        result = on_node(client, f"{rados} -p {pool} put caps-probe /etc/hostname")
        assert result.returncode != 0, pool
        assert "Operation not permitted" in result.stdout + result.stderr, pool
    # Nor can it change the cluster.
    result = on_node(client, f"ceph --id {client} osd pool create caps-probe 8")
    assert result.returncode != 0


def test_ceph_ports_only_from_the_ceph_networks(ceph: CephLab):
    mon = ceph.group("ceph_mon")[0]
    client = ceph.group("slurm_compute")[0]
    mon_addr = ceph.storage_address(mon)
    mgmt_source = ceph.expanded["hosts"][client]["address"]
    osd = ceph.ceph("osd dump")["osds"][0]
    v2 = next(a for a in osd["public_addrs"]["addrvec"] if a["type"] == "v2")
    osd_port = int(v2["addr"].rsplit(":", 1)[1])
    osd_host = ceph.osd_hosts()[osd["osd"]]
    osd_addr = ceph.storage_address(osd_host)
    # Between nodes on the storage network: open.
    for addr, port in ((mon_addr, 3300), (mon_addr, 6789), (osd_addr, osd_port)):
        assert ceph.sh(client, connect_script(addr, port)).strip() == "open", (addr, port)
    # From the same node speaking from its management address: the plan's Ceph networks
    # are the storage network only, so the firewall drops it; SSH answers (the control).
    assert ceph.sh(client, connect_script(mon_addr, 22, mgmt_source)).strip() == "open"
    for port in (3300, 6789):
        probe = ceph.sh(client, connect_script(mon_addr, port, mgmt_source)).strip()
        assert probe.startswith("closed"), port
    # From outside every plan network, cabled into the storage network: closed; SSH open.
    with outside_namespace(ceph.expanded, legs=("storage",)) as ns:
        assert ssh_reachable(ns, mon_addr, "198.51.100.8"), mon_addr
        for addr, port in ((mon_addr, 3300), (mon_addr, 6789), (osd_addr, osd_port)):
            probe = probe_from_namespace(ns, addr, port, "198.51.100.8")
            assert probe.startswith("closed"), (addr, port, probe)
        assert ssh_reachable(ns, ceph.expanded["hosts"][mon]["address"], OUTSIDE)


def test_nfs_exports_serve_the_export_network_through_a_user_space_client(ceph: CephLab):
    nfs = ceph.expanded["storage"]["nfs"]
    server = nfs["server"]
    export = nfs["exports"][0]
    client = ceph.group("slurm_compute")[0]
    address = ceph.expanded["hosts"][server]["interfaces"][export["network"]]["address"]
    url = f"nfs://{address}{export['path']}"
    fs = ceph.expanded["storage"]["ceph"]["cephfs"]
    backing = f"{fs['mount']}/volumes/nfs{export['path'].replace('/', '_')}"
    # A user's directory, made through the CephFS: the export shows the same files. (The
    # files of an earlier run on this lab go first: libnfs's nfs-cp does not overwrite.)
    ceph.sh(
        client,
        f"mkdir -p {backing}/u1000 && chown 1000:1000 {backing}/u1000 "
        f"&& rm -f {backing}/u1000/probe {backing}/u1000/big",
    )
    listing = ceph.sh(client, f"nfs-ls '{url}?version=4'")
    assert "u1000" in listing
    # libnfs 4.0.0 (Debian 12) cannot encode an NFSv4 WRITE of 4 KiB or more ("ZDR error:
    # Failed to encode COMPOUND4args"): the client writes 3 KiB; reads have no such limit.
    payload = ceph.sh(
        client, "head -c 3072 /dev/urandom > /tmp/nfs-probe && sha256sum < /tmp/nfs-probe"
    ).split()[0]
    user = "version=4&uid=1000&gid=1000"
    ceph.sh(client, f"nfs-cp /tmp/nfs-probe '{url}/u1000/probe?{user}'")
    back = ceph.sh(client, f"nfs-cat '{url}/u1000/probe?{user}' | sha256sum").split()[0]
    assert back == payload
    # The file is in the CephFS behind the export, and a big file written there reads back
    # through the export.
    assert ceph.sh(client, f"sha256sum < {backing}/u1000/probe").split()[0] == payload
    big = ceph.sh(
        client,
        f"head -c 4194304 /dev/urandom > {backing}/u1000/big && chown 1000 {backing}/u1000/big"
        f" && sha256sum < {backing}/u1000/big",
    ).split()[0]
    assert ceph.sh(client, f"nfs-cat '{url}/u1000/big?{user}' | sha256sum").split()[0] == big
    # root is squashed: it cannot write to the export's root (owned by root, 0755).
    squashed = on_node(client, f"nfs-cp /tmp/nfs-probe '{url}/root-probe?version=4&uid=0&gid=0'")
    assert squashed.returncode != 0
    # Port 2049 answers the export's network only.
    mgmt_source = ceph.expanded["hosts"][client]["address"]
    assert ceph.sh(client, connect_script(address, 2049)).strip() == "open"
    mgmt_addr = ceph.expanded["hosts"][server]["address"]
    assert ceph.sh(client, connect_script(mgmt_addr, 2049, mgmt_source)).startswith("closed")
    assert ceph.sh(client, connect_script(mgmt_addr, 22, mgmt_source)).strip() == "open"


# --- data through faults, growth and bad disks (these change the lab, then restore it) ------


@dataclass
class Written:
    """Objects (pool -> name -> sha256) and client files (path -> sha256) written once."""

    objects: dict[str, dict[str, str]]
    files: dict[str, str]
    client: str


# The objects go through one librados client (the Python binding the `ceph` command itself
# runs on): a `rados` process per object pays a client start and a monitor handshake each,
# most of a minute for the 200 objects on a loaded machine. An object that fails to read is
# named on stderr and left out of the sums, as a failed `rados get` was.
WRITE_OBJECTS = """
python3 - <<'PY'
import hashlib, os, rados
cluster = rados.Rados(conffile="")
cluster.connect()
io = cluster.open_ioctx("{pool}")
for i in range(1, {count} + 1):
    data = os.urandom(65536)
    io.write_full(f"cp-obj-{{i}}", data)
    print(hashlib.sha256(data).hexdigest(), f"cp-obj-{{i}}")
io.close()
cluster.shutdown()
PY
"""

READ_OBJECTS = """
python3 - {names} <<'PY'
import hashlib, sys, rados
cluster = rados.Rados(conffile="")
cluster.connect()
io = cluster.open_ioctx("{pool}")
for name in sys.argv[1:]:
    try:
        data = io.read(name, 1 << 20)  # the whole object: they are 64 KiB
    except rados.Error as error:
        print(f"{{name}}: {{error}}", file=sys.stderr)
        continue
    print(hashlib.sha256(data).hexdigest(), name)
io.close()
cluster.shutdown()
PY
"""


def parse_sums(text: str) -> dict[str, str]:
    return {name: digest for digest, name in (ln.split() for ln in text.splitlines() if ln)}


@pytest.fixture(scope="module")
def written(converged_lab: Converged) -> Written:  # noqa: F811
    """At least 200 objects across a 3-replica pool and the dataset pool, and files through
    a client's mount (the shared tree and a dataset path), with their checksums."""
    converged_lab.require_converged()
    cluster = CephLab(converged_lab.expanded, converged_lab)
    datasets = cluster.expanded["scheduler"]["datasets"]
    dataset = next(d for d in datasets.values() if d.get("pool"))
    general = next(
        p["name"]
        for p in cluster.expanded["storage"]["ceph"]["pools"]
        if p["name"] != dataset["pool"] and p.get("application", "rbd") == "rbd"
    )
    objects = {
        pool: parse_sums(cluster.sh(cluster.admin, WRITE_OBJECTS.format(pool=pool, count=count)))
        for pool, count in ((general, OBJECTS // 2), (dataset["pool"], OBJECTS // 2))
    }
    client = cluster.group("slurm_compute")[0]
    mount = cluster.expanded["storage"]["ceph"]["cephfs"]["mount"]
    files: dict[str, str] = {}
    for directory in (f"{mount}/cp-faults", f"{dataset['path']}/cp-faults"):
        files.update(
            parse_sums(cluster.sh(client, WRITE_FILES.format(directory=directory, count=FILES)))
        )
    assert sum(len(v) for v in objects.values()) >= OBJECTS
    return Written(objects, files, client)


def read_back(
    cluster: CephLab, data: Written, host: str = ""
) -> tuple[dict[str, str], dict[str, str]]:
    """Checksums of every written object (read on `host`, default the first monitor) and of
    every file (read through the client's mount)."""
    objects: dict[str, str] = {}
    for pool, sums in data.objects.items():
        names = " ".join(sorted(sums))
        out = cluster.sh(
            host or cluster.admin, READ_OBJECTS.format(pool=pool, names=names), timeout=600
        )
        objects.update({f"{pool}/{name}": d for name, d in parse_sums(out).items()})
    files = parse_sums(
        cluster.sh(data.client, "sha256sum " + " ".join(sorted(data.files)), timeout=600)
    )
    return objects, files


def expected_objects(data: Written) -> dict[str, str]:
    return {f"{pool}/{name}": d for pool, sums in data.objects.items() for name, d in sums.items()}


def wait_for(predicate: Any, timeout: float, what: str, step: float = 3) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.mark.lab_changes
def test_data_survives_a_storage_node_down_and_its_return(ceph: CephLab, written: Written):
    dataset = next(d for d in ceph.expanded["scheduler"]["datasets"].values() if d.get("pool"))
    # A storage node in the dataset's rack that is also a monitor: its OSD, a replica of the
    # dataset pool and one of three monitors go away together.
    victim = next(
        h
        for h in ceph.group("ceph_mon")
        if h in ceph.group("ceph_osd")
        and ceph.expanded["hosts"][h]["rack"] in dataset["racks"]
        and h != ceph.admin
    )
    victim_osds = {o for o, h in ceph.osd_hosts().items() if h == victim}
    reader = next(h for h in ceph.group("ceph_mon") if h not in (victim, ceph.admin))
    fault = cli("lab", "fault", str(PLAN), victim, "--down")
    assert fault.returncode == 0, fault.stderr
    try:
        wait_for(
            lambda: all(
                o["up"] == 0 for o in ceph.ceph("osd dump")["osds"] if o["osd"] in victim_osds
            ),
            180,
            f"the OSDs of {victim} to be marked down",
        )
        health = ceph.ceph("health detail")
        assert health["status"] == "HEALTH_WARN"
        assert {"OSD_DOWN", "MON_DOWN"} <= set(health["checks"]), health["checks"].keys()
        objects, files = read_back(ceph, written, host=reader)
        assert objects == expected_objects(written)
        assert files == written.files
    finally:
        cli("lab", "fault", str(PLAN), victim, "--clear")
    ceph.wait_health_ok()
    objects, files = read_back(ceph, written)
    assert objects == expected_objects(written)
    assert files == written.files


@pytest.mark.lab_changes
def test_an_evicted_client_is_mounted_again_by_the_next_run(ceph: CephLab):
    """A node away longer than the MDS's session timeout comes back evicted: its mount is
    still listed, and every call on it fails. The next run of the storage stage finds that
    and mounts the file system again (roles/ceph/tasks/client.yml)."""
    fs = ceph.expanded["storage"]["ceph"]["cephfs"]
    client = ceph.group("slurm_compute")[-1]
    sessions = ceph.ceph(f"tell mds.{fs['name']}:0 client ls")
    ids = [s["id"] for s in sessions if s["client_metadata"].get("hostname") == client]
    assert ids, f"{client} has no CephFS session: {sessions}"
    for session in ids:
        ceph.sh(ceph.admin, f"ceph tell mds.{fs['name']}:0 client evict id={session}")
    broken = on_node(client, f"stat -- {fs['mount']}")
    assert broken.returncode != 0, f"{client}: {fs['mount']} still answers after the eviction"

    run = playbook(PLAN, ["playbooks/storage.yml"], "--limit", client)
    assert run.ok, run.result.stdout[-3000:]
    changes = changed_lines(run.result.stdout)
    assert len(changes) == 1 and changes[0].startswith(
        "TASK [ceph : Mount the file system again where its client was evicted]"
    ), "\n".join(changes)
    ceph.sh(client, f"stat -- {fs['mount']} && ls {fs['mount']}/volumes")
    again = playbook(PLAN, ["playbooks/storage.yml"], "--limit", client)
    assert again.ok and recap(again.result.stdout)[client]["changed"] == 0, "\n".join(
        changed_lines(again.result.stdout)
    )


@pytest.mark.lab_changes
def test_cluster_keeps_serving_with_one_monitor_of_three_stopped(ceph: CephLab, written: Written):
    mons = ceph.group("ceph_mon")
    assert len(mons) == 3
    stopped = mons[-1]
    ceph.sh(stopped, f"systemctl stop ceph-mon@{stopped}")
    try:
        wait_for(
            lambda: stopped not in ceph.ceph("quorum_status")["quorum_names"],
            120,
            "the quorum to drop the stopped monitor",
        )
        assert len(ceph.ceph("quorum_status")["quorum_names"]) == 2
        pool = next(iter(written.objects))
        ceph.sh(ceph.admin, f"echo one-mon-down | rados -p {pool} put cp-mon-probe -")
        assert ceph.sh(mons[1], f"rados -p {pool} get cp-mon-probe -").strip() == "one-mon-down"
        ceph.sh(ceph.admin, f"rados -p {pool} rm cp-mon-probe")
        path = f"{ceph.expanded['storage']['ceph']['cephfs']['mount']}/cp-faults/mon-probe"
        ceph.sh(written.client, f"echo one-mon-down > {path} && cat {path} && rm {path}")
    finally:
        ceph.sh(stopped, f"systemctl start ceph-mon@{stopped}")
    wait_for(
        lambda: sorted(ceph.ceph("quorum_status")["quorum_names"]) == mons,
        180,
        "the monitor to rejoin the quorum",
    )
    ceph.wait_health_ok()


@pytest.fixture
def filesystem_disk(ceph: CephLab) -> Iterator[tuple[str, str, str, Path]]:
    """A small ext4 image of our own on a loop device, given to an OSD host's own /dev:
    (host, device in the node, the image's sha256, the image)."""
    from cluster_plan.lab import state

    host = ceph.group("ceph_osd")[-1]
    st = state.load(for_plan(ceph.expanded).state_file)
    assert st is not None
    init = st.nodes[host].pid
    with tempfile.TemporaryDirectory(prefix="cp-baddisk-", dir="/var/tmp") as tmp:
        image = Path(tmp) / "fs.img"
        with open(image, "wb") as handle:
            handle.truncate(64 << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
        digest = sha256(image)
        loop = subprocess.run(
            ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
        ).stdout.strip()
        minor = int(loop.removeprefix("/dev/loop"))
        # A name of our own in the node: its /dev may already hold a /dev/loopN of the lab's
        # (mknod failed there with the host's free loop0), and teardown removes only ours.
        # `mknod -m` fails in the node's root ("cannot set permissions: Operation not
        # supported": its mode is set through /proc/self/fd, absent under nsenter -r), so the
        # mode is set by a plain chmod after.
        device = f"/dev/cp-baddisk{minor}"
        inside = ["nsenter", "-t", str(init), "-m", "-r"]
        try:
            for argv in (["mknod", device, "b", "7", str(minor)], ["chmod", "660", device]):
                made = subprocess.run([*inside, *argv], capture_output=True, text=True)
                assert made.returncode == 0, f"{host}: {' '.join(argv)}: {made.stderr}"
            yield host, device, digest, image
        finally:
            subprocess.run([*inside, "rm", "-f", device], check=False)
            subprocess.run(["losetup", "-d", loop], check=False)


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.lab_changes
def test_bad_disks_fail_their_host_with_a_clear_message_and_nothing_is_wiped(
    ceph: CephLab, filesystem_disk: tuple[str, str, str, Path], tmp_path: Path
):
    host, device, digest, image = filesystem_disk
    plan = yaml.safe_load(PLAN.read_text())
    group = ceph.expanded["hosts"][host]["node_group"]
    plan["node_groups"][group]["nodes"] = {
        host: {
            "disks": [
                {"name": "fsdisk", "size_gb": 1, "use": "osd", "device": device},
                {
                    "name": "ghost",
                    "size_gb": 1,
                    "use": "osd",
                    "device": "/dev/disk/by-id/lab-ghost",
                },
            ]
        }
    }
    bad_plan = tmp_path / "cluster.yml"
    bad_plan.write_text(yaml.safe_dump(plan, sort_keys=False))
    shutil.copy(PLAN.with_suffix(".lock.json"), tmp_path / "cluster.lock.json")
    assert cli("lock", str(bad_plan)).returncode == 0
    up_before = sorted(o["osd"] for o in ceph.ceph("osd dump")["osds"] if o["up"] == 1)
    run = playbook(bad_plan, ["playbooks/storage.yml"], "--limit", host)
    assert not run.ok
    assert recap(run.result.stdout)[host]["failed"] == 1
    assert (
        f"host {host}: OSD disk fsdisk ({device}) holds a file system (ext4); refusing to wipe it"
        in run.output
    )
    assert f"host {host}: OSD disk ghost (/dev/disk/by-id/lab-ghost) does not exist" in run.output
    assert "Traceback" not in run.output
    # Nothing was wiped, and the host's own OSD runs on.
    assert sha256(image) == digest
    blkid = subprocess.run(
        ["blkid", "-p", "-o", "value", "-s", "TYPE", str(image)], capture_output=True, text=True
    )
    assert blkid.stdout.strip() == "ext4"
    assert sorted(o["osd"] for o in ceph.ceph("osd dump")["osds"] if o["up"] == 1) == up_before
