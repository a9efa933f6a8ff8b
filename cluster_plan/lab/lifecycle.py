"""lab up / down / restart: bring the plan's cluster up idempotently, and remove it fully."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from cluster_plan.lab import (
    connection,
    fabric,
    guard,
    hardware,
    hostchanges,
    images,
    node,
    role_packages,
    rootfs,
    sitesvc,
    state,
)
from cluster_plan.lab.names import CACHE_ROOT, RUN_ROOT, LabError, LabNames, for_plan
from cluster_plan.lab.proc import ProcRef, kill_netns_processes, run, spawn
from cluster_plan.lab.topology import (
    admin_addresses,
    fabric_digest,
    host_digests,
    plan_changes,
    proxy_bypass,
    wiring,
)
from cluster_plan.plan.contract import ExpandedPlan

BOOT_TIMEOUT_S = 180


def require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root (namespaces, bridges, mounts); run it with sudo")


def ensure_ssh_key(names: LabNames) -> str:
    key = names.ssh_key
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "cluster-plan-lab",
                "-f",
                str(key),
            ]
        )
    return key.with_suffix(".pub").read_text()


def is_up(names: LabNames, st: state.LabState | None, expanded: ExpandedPlan) -> bool:
    if st is None or not fabric.netns_exists(names.admin_ns) or not guard.present(expanded):
        return False
    return all(host in st.nodes and st.nodes[host].alive() for host in expanded["hosts"]) and all(
        ref.alive() for ref in st.services.values()
    )


def up(expanded: ExpandedPlan, plan_path: str, log: Any = sys.stderr) -> bool:
    """Bring the lab up; returns False when it was already up (nothing done)."""
    require_root()
    names = for_plan(expanded)
    with state.locked(RUN_ROOT, names.lab):
        return _up(names, expanded, plan_path, log)


def _up(names: LabNames, expanded: ExpandedPlan, plan_path: str, log: Any) -> bool:
    current = state.load(names.state_file)
    if current is not None:
        _follow_plan(names, current, expanded)
    if is_up(names, current, expanded):
        return False
    if current is None:
        guard.check_no_overlap(expanded)
    # hosts that join a running lab boot the bare base: the roles install their packages
    joining = set(expanded["hosts"]) - set(current.host_digests) if current else set()
    st = current or state.LabState(lab=names.lab, plan=str(Path(plan_path).resolve()))
    st.cidrs = guard.plan_cidrs(expanded)
    st.fabric_digest = fabric_digest(expanded)
    st.host_digests = host_digests(expanded)
    state.save(names.state_file, st)
    for key in hostchanges.prepare():
        print(f"lab {names.lab}: raised {key} for the nodes' systemd", file=log)
    started = time.monotonic()
    base = rootfs.ensure_base(log=names.run_dir / "debootstrap.log")
    print(
        f"lab {names.lab}: base image {base.name} ready ({time.monotonic() - started:.0f}s)",
        file=log,
    )
    pubkey = ensure_ssh_key(names)
    names.control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    guard.add(expanded)
    wires = wiring(expanded)
    fabric.build_fabric(names, wires)
    net_name, addresses, prefixlen = admin_addresses(expanded)
    core_bridge = next(b for b in wires.bridges if b.network == net_name)
    fabric.wire_admin(names, core_bridge.name, addresses, prefixlen, core_bridge.mtu)
    _start_services(names, expanded, st, addresses)
    dns = list(expanded["networks"][net_name]["dns"])
    booting = [h for h in expanded["hosts"] if h not in st.nodes or not st.nodes[h].alive()]
    lowers = node_images(names, expanded, booting, joining, base, log)
    for host in booting:
        ports = [p for p in wires.ports if p.host == host]
        _boot_node(names, st, host, expanded["hosts"][host], ports, (lowers[host], pubkey, dns))
    wait_ready(names, st, expanded)
    print(
        f"lab {names.lab}: {len(expanded['hosts'])} nodes up ({time.monotonic() - started:.0f}s)",
        file=log,
    )
    return True


def _follow_plan(names: LabNames, current: state.LabState, expanded: ExpandedPlan) -> None:
    """A running lab takes added hosts; any other change of the plan needs a new lab."""
    changed, added = plan_changes(expanded, current.fabric_digest, current.host_digests)
    if changed:
        raise LabError(
            f"lab {names.lab} runs an earlier version of the plan ("
            f"{', '.join(changed)} changed or went away): run `lab down` then "
            "`lab up`"
        )
    if added and "site-dns-ntp" in current.services:  # its zone must learn the new hosts
        current.services.pop("site-dns-ntp").stop()


def node_images(
    names: LabNames,
    expanded: ExpandedPlan,
    hosts: list[str],
    joining: set[str],
    base: Path,
    log: Any,
) -> dict[str, list[Path]]:
    """The image each of `hosts` boots on (its lowerdirs, top first): the one it booted on
    before (its disk sits on it); else the bare base for a host joining a running lab; else
    the plan's (`lab.image`), whose layers are built here when this machine has none yet."""
    found = {h: lower for h in hosts if (lower := images.recorded(names.node_dir(h)))}
    fresh = [h for h in hosts if h not in found]
    layers: dict[str, tuple[images.Layer, ...]] = {}
    if fresh and images.image_setting(expanded)[0] == "packages":
        if not role_packages.ROLES.is_dir():
            raise LabError(
                f"lab.image packages builds node images from the roles' package lists, "
                f"and {role_packages.ROLES} is not there: run the lab from the repository"
            )
        packages = role_packages.host_packages(expanded, role_packages.load_role_vars())
        layers = images.node_layers(expanded, packages, rootfs.cache_key())

    def say(text: str) -> None:
        print(f"lab {names.lab}: {text}", file=log)

    for host in fresh:
        chosen = () if host in joining else layers.get(host, ())
        found[host] = images.ensure(chosen, base, log_dir=names.run_dir, say=say)
        # at once: a joining host stays bare when a stopped `lab up` is run again
        images.record(names.node_dir(host), found[host])
    return found


def _boot_node(
    names: LabNames,
    st: state.LabState,
    host: str,
    spec: Any,
    ports: list[Any],
    boot: tuple[list[Path], str, list[str]],
) -> None:
    """Wire, prepare and boot one node (`boot`: its image's lowerdirs, the lab's public key,
    the DNS servers); its processes are in the state file as soon as they exist."""
    lower, pubkey, dns = boot
    fabric.ensure_netns(names.node_ns(host))
    for port in ports:
        fabric.wire_port(names, port)
    hardware.attach_disks(names, host, spec, st.loops)
    node.prepare_upper(names, host, spec, pubkey, dns)
    kill_netns_processes(names.node_ns(host))  # a node left from a lost state file
    node.remove_cgroups(names, host)
    script = node.boot_script(names, host, spec, lower, st.loops)
    parent, init = node.boot(names, host, script)
    st.nodes[host] = init
    st.services[f"boot-{host}"] = parent
    state.save(names.state_file, st)


def _start_services(
    names: LabNames, expanded: ExpandedPlan, st: state.LabState, addresses: list[str]
) -> None:
    """The apt proxy (root namespace, unix socket only), its relay and DNS/NTP (admin)."""
    address = addresses[0]
    python = sys.executable
    env_path = str(Path(__file__).resolve().parents[2])
    # the lab runs the package proxy the plan names, or one of its own on the admin address
    port = proxy_bypass(expanded).port
    cache = CACHE_ROOT / "apt"
    cache.mkdir(parents=True, exist_ok=True)
    logs = names.run_dir / "logs"
    if not (st.services.get("apt-proxy") and st.services["apt-proxy"].alive()):
        st.services["apt-proxy"] = spawn(
            [
                "env",
                f"PYTHONPATH={env_path}",
                python,
                "-m",
                "cluster_plan.lab.proxy",
                "serve",
                str(names.proxy_socket),
                str(cache),
                names.admin_ns,
            ],
            logs / "apt-proxy.log",
        )
        # recorded at once: it runs in the root namespace, where only its pid finds it
        state.save(names.state_file, st)
    if not (st.services.get("apt-relay") and st.services["apt-relay"].alive()):
        st.services["apt-relay"] = spawn(
            [
                "ip",
                "netns",
                "exec",
                names.admin_ns,
                "env",
                f"PYTHONPATH={env_path}",
                python,
                "-m",
                "cluster_plan.lab.proxy",
                "relay",
                address,
                str(port),
                str(names.proxy_socket),
                names.admin_ns,
            ],
            logs / "apt-relay.log",
        )
    if not (st.services.get("site-dns-ntp") and st.services["site-dns-ntp"].alive()):
        zone = names.run_dir / "zone.json"
        zone.write_text(json.dumps(sitesvc.zone_of(expanded)))
        st.services["site-dns-ntp"] = spawn(
            [
                "ip",
                "netns",
                "exec",
                names.admin_ns,
                "env",
                f"PYTHONPATH={env_path}",
                python,
                "-m",
                "cluster_plan.lab.sitesvc",
                str(zone),
                names.admin_ns,
                *addresses,
            ],
            logs / "site.log",
        )
    state.save(names.state_file, st)


def wait_ready(names: LabNames, st: state.LabState, expanded: ExpandedPlan) -> None:
    """Wait until every node's sshd listens (read from the node's /proc, no packets sent)."""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    pending = set(expanded["hosts"])
    while pending and time.monotonic() < deadline:
        pending = {h for h in pending if not node.sshd_listening(st.nodes[h])}
        dead = [h for h in pending if not st.nodes[h].alive()]
        if dead:
            raise LabError(
                f"node(s) died while booting: {', '.join(sorted(dead))}; see "
                f"{names.run_dir}/nodes/<host>/console.log"
            )
        time.sleep(0.2)
    if pending:
        raise LabError(
            f"sshd did not start within {BOOT_TIMEOUT_S}s on: {', '.join(sorted(pending))}"
        )


def down(expanded: ExpandedPlan) -> list[str]:
    """Remove everything this lab made; returns what was removed (for the user)."""
    require_root()
    names = for_plan(expanded)
    with state.locked(RUN_ROOT, names.lab, remove=True):
        return _down(names, expanded)


def _down(names: LabNames, expanded: ExpandedPlan) -> list[str]:
    st = state.load(names.state_file)
    removed: list[str] = []
    if st:
        for host, init in st.nodes.items():
            node.set_frozen(names, host, False)  # a frozen process ignores even SIGKILL
            if init.alive():
                node.stop(init)
                removed.append(f"node {host}")
        for ref in [*st.delays.values(), *st.services.values()]:
            ref.stop()
    for ns in fabric.lab_namespaces(names, [*expanded["hosts"], *(st.nodes if st else [])]):
        kill_netns_processes(ns)
        fabric.delete_netns(ns)
        removed.append(f"netns {ns}")
    if st and st.services.get("apt-proxy"):
        st.services["apt-proxy"].stop()
    names.proxy_socket.unlink(missing_ok=True)
    guard.remove(expanded, keep=state.other_labs_cidrs(RUN_ROOT, names.lab))
    node.remove_cgroups(names)
    hardware.detach_disks(names, st.loops if st else {})
    shutil.rmtree(names.var_dir / "nodes", ignore_errors=True)
    with contextlib.suppress(OSError):
        names.var_dir.rmdir()  # only when empty
    shutil.rmtree(names.run_dir, ignore_errors=True)
    hostchanges.undo_when_last()
    return removed


def restart_node(expanded: ExpandedPlan, host: str) -> ProcRef:
    """Power-cycle one node: its overlay (its disk) survives, its processes do not."""
    require_root()
    names = for_plan(expanded)
    with state.locked(RUN_ROOT, names.lab):
        return _restart_node(names, expanded, host)


def _restart_node(names: LabNames, expanded: ExpandedPlan, host: str) -> ProcRef:
    st = state.load(names.state_file)
    if st is None or host not in st.nodes:
        raise LabError(f"node {host} is not part of a running lab {names.lab}")
    _power_off(names, st, host, expanded["hosts"][host]["address"])
    return _boot_again(names, st, expanded, host)


def _boot_again(names: LabNames, st: state.LabState, expanded: ExpandedPlan, host: str) -> ProcRef:
    """Boot a powered-off node from its overlay, record it, and wait for its sshd."""
    spec = expanded["hosts"][host]
    lower = images.recorded(names.node_dir(host)) or [rootfs.base_dir()]
    script = node.boot_script(names, host, spec, lower, st.loops)
    parent, init = node.boot(names, host, script)
    st.nodes[host] = init
    st.services[f"boot-{host}"] = parent
    state.save(names.state_file, st)
    wait_ready(names, st, {**expanded, "hosts": {host: spec}})
    return init


def _power_off(names: LabNames, st: state.LabState, host: str, address: str | None) -> None:
    if address:
        connection.close_master(names, address)
    node.set_frozen(names, host, False)
    if host in st.nodes:
        node.stop(st.nodes.pop(host))
    parent = st.services.pop(f"boot-{host}", None)
    if parent:
        parent.stop()
    kill_netns_processes(names.node_ns(host))
    node.remove_cgroups(names, host)


def retire_node(expanded: ExpandedPlan, host: str) -> bool:
    """Power a node off for good (it left the plan): its processes, namespace, disks and
    overlay go, and the lab forgets it. Safe to run again after an interruption: what is
    left of the node is removed whether or not the state still names it. False when nothing
    of it was there."""
    require_root()
    names = for_plan(expanded)
    with state.locked(RUN_ROOT, names.lab):
        st = state.load(names.state_file)
        if st is None:
            return False
        known = host in st.nodes or host in st.host_digests
        left = known or fabric.netns_exists(names.node_ns(host)) or names.node_dir(host).exists()
        spec = expanded["hosts"].get(host)
        _power_off(names, st, host, spec["address"] if spec else None)
        fabric.delete_netns(names.node_ns(host))
        hardware.detach_host_disks(names, host, st.loops)
        hardware.detach_images(names.node_dir(host) / "disks")
        shutil.rmtree(names.node_dir(host), ignore_errors=True)
        st.host_digests.pop(host, None)
        state.save(names.state_file, st)  # last: a stop before here leaves it to a re-run
        return left


def reimage_node(expanded: ExpandedPlan, host: str) -> ProcRef:
    """New hardware under the same name: the node boots from a fresh disk (its overlay and
    OSD disks are new and empty), with the same cables (its namespace and ports stay, as for
    `lab restart`) and addresses. Safe to run again: a node a stopped run left powered off is
    booted fresh."""
    require_root()
    names = for_plan(expanded)
    with state.locked(RUN_ROOT, names.lab):
        st = state.load(names.state_file)
        if st is None or host not in expanded["hosts"] or host not in st.host_digests:
            raise LabError(f"node {host} is not part of a running lab {names.lab}")
        _power_off(names, st, host, expanded["hosts"][host]["address"])
        hardware.detach_host_disks(names, host, st.loops)
        hardware.detach_images(names.node_dir(host) / "disks")
        # the new disk gets the image the node had: the same provisioning, new hardware
        lower = images.recorded(names.node_dir(host)) or [rootfs.base_dir()]
        shutil.rmtree(names.node_dir(host), ignore_errors=True)
        images.record(names.node_dir(host), lower)
        spec = expanded["hosts"][host]
        net_name = expanded["cluster"]["management_network"]
        dns = list(expanded["networks"][net_name]["dns"])
        hardware.attach_disks(names, host, spec, st.loops)
        node.prepare_upper(names, host, spec, ensure_ssh_key(names), dns)
        st.host_digests[host] = host_digests(expanded)[host]
        return _boot_again(names, st, expanded, host)
