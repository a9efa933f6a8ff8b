"""Semantic checks: what JSON Schema cannot say about a plan. Each check yields findings."""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from cluster_plan.allocate import pin_refusal
from cluster_plan.catalog import load_catalog
from cluster_plan.findings import Finding
from cluster_plan.networks import AddressError, network_space, parse_address, parse_network
from cluster_plan.nodes import Node, hostname_findings
from cluster_plan.topology import normalize, rack_switches

Plan = dict[str, Any]
Check = Callable[[Plan, list[Node]], Iterator[Finding]]
MAX_NODES = 100_000
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# TCP goodput over line rate: headers and framing cost ~6% at MTU 1500 and ~1% at 9000.
GOODPUT_1500 = 0.94
GOODPUT_9000 = 0.99


def _did_you_mean(name: str, known: Any) -> str | None:
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f"did you mean {close[0]!r}?" if close else (
        "known: " + ", ".join(map(str, known)) if known else None)


def _missing(kind: str, name: str, known: Any, path: tuple[Any, ...]) -> Finding:
    return Finding("unknown-reference", f"{kind} {name!r} is not defined", path,
                   hint=_did_you_mean(name, known))


def check_networks(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    parsed = {}
    for name, spec in plan["networks"].items():
        path = ("networks", name)
        try:
            net = parse_network(spec["cidr"])
        except AddressError as exc:
            yield Finding("network-address", str(exc), (*path, "cidr"))
            continue
        parsed[name] = net
        for key in ("gateway",):
            if key in spec:
                yield from _inside(spec[key], net, name, (*path, key), key)
        for key in ("dns", "ntp"):
            for i, value in enumerate(spec.get(key, []) or []):
                if key == "ntp" and not re.match(r"^[0-9.]+$", value):
                    continue  # a host name
                yield from _inside(value, net, name, (*path, key, i), key.upper() + " server",
                                   outside_ok=True)
        reserved = spec.get("reserved", [])
        if isinstance(reserved, list):
            for i, entry in enumerate(reserved):
                try:
                    space = network_space(name, {"cidr": spec["cidr"], "reserved": [entry]})
                except AddressError as exc:
                    yield Finding("network-address", str(exc), (*path, "reserved", i))
                    continue
                if not space.reserved or len(space.reserved) < _entry_size(entry):
                    yield Finding("reserved-outside", f"reserved {entry!r} is not (wholly) "
                                  f"inside {net}", (*path, "reserved", i))
    k8s = plan.get("scheduler", {}).get("kubernetes", {})
    for key in ("pod_cidr", "service_cidr"):
        if key in k8s:
            try:
                parsed[f"scheduler.kubernetes.{key}"] = parse_network(k8s[key])
            except AddressError as exc:
                yield Finding("network-address", str(exc), ("scheduler", "kubernetes", key))
    names = list(parsed)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if parsed[a].first <= parsed[b].last and parsed[b].first <= parsed[a].last:
                at: tuple[str, ...] = (
                    ("networks", b, "cidr") if not b.startswith("scheduler.") else
                    ("scheduler", "kubernetes", b.rsplit(".", 1)[1]))
                yield Finding("network-overlap", f"{b} ({parsed[b]}) overlaps {a} "
                              f"({parsed[a]})", at)
    gateways = [n for n, s in plan["networks"].items() if s.get("gateway")]
    if len(gateways) > 1:
        yield Finding("multiple-gateways", f"networks {', '.join(gateways)} all have a gateway; "
                      "hosts get one default route", ("networks", gateways[1], "gateway"),
                      severity="warning", hint="keep the gateway on one network")


def _entry_size(entry: str) -> int:
    try:
        space = network_space("x", {"cidr": "0.0.0.0/0", "reserved": [entry]})
    except AddressError:
        return 0
    return len(space.reserved)


def _inside(value: str, net: Any, name: str, path: tuple[Any, ...], what: str,
            outside_ok: bool = False) -> Iterator[Finding]:
    try:
        address = parse_address(value)
    except AddressError as exc:
        yield Finding("network-address", str(exc), path)
        return
    if not net.first <= address <= net.last:
        if not outside_ok:
            yield Finding("address-outside", f"{what} {value} is not inside network {name} "
                          f"({net})", path)
        else:
            yield Finding("address-outside", f"{what} {value} is not on network {name} ({net}); "
                          "nodes need a route to it", path, severity="warning")
    elif address in (net.first, net.last) and net.prefixlen < 31:
        yield Finding("address-outside", f"{what} {value} is the network or broadcast address "
                      f"of {net}", path)


def check_capacity(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    for name, spec in plan["networks"].items():
        try:
            space = network_space(name, spec)
        except AddressError:
            continue  # reported by check_networks
        hosts = sum(1 for node in nodes if name in node.networks)
        reserved_inside = space.reserved.count_within(space.first_host, space.last_host)
        free = space.usable - reserved_inside
        if hosts > free:
            yield Finding("network-capacity", f"network {name} ({space.network}) has {free} "
                          f"free addresses for {hosts} hosts", ("networks", name, "cidr"),
                          hint="use a larger prefix, or fewer reserved addresses")
        elif hosts > 0.9 * free and free > 10:
            yield Finding("network-nearly-full", f"network {name} would be {hosts}/{free} "
                          "full; there is little room to grow", ("networks", name, "cidr"),
                          severity="warning")


def check_nodes(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    yield from hostname_findings(plan)
    if len(nodes) > MAX_NODES:
        yield Finding("too-many-nodes", f"the plan has {len(nodes)} nodes; the limit is "
                      f"{MAX_NODES}", ("node_groups",))
    seen: dict[str, Node] = {}
    bad_names = 0
    # one finding per pair of groups: two copies of a 40,000-node group are one mistake
    duplicates: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node in nodes:
        if node.name in seen:
            duplicates[(seen[node.name].group, node.group)].append(node.name)
        else:
            seen[node.name] = node
        if not _DNS_LABEL.match(node.name) and bad_names < 3:
            bad_names += 1
            yield Finding("hostname-invalid", f"{node.name!r} is not a valid DNS label "
                          "(a-z, 0-9 and '-', at most 63, no '-' at either end)",
                          ("node_groups", node.group, "hostname"))
    for (first, second), names in duplicates.items():
        hosts = f"host {names[0]} is" if len(names) == 1 else (
            f"{len(names)} hosts ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) are")
        by = (f"node group {first} more than once" if first == second
              else f"both node groups {first} and {second}")
        yield Finding("duplicate-hostname", f"{hosts} produced by {by}",
                      ("node_groups", second, "hostname"))
    domain = plan["cluster"].get("domain", "")
    for name in seen:
        if len(name) + 1 + len(domain) > 253:
            yield Finding("hostname-invalid", f"{name}.{domain} is longer than 253 characters",
                          ("cluster", "domain"))
            break
    pins: dict[tuple[str, str], str] = {}
    produced_by: dict[str, set[str]] = defaultdict(set)  # once, not once per group
    for node in nodes:
        produced_by[node.group].add(node.name)
    for group_name, group in plan["node_groups"].items():
        produced = produced_by[group_name]
        for host, override in (group.get("nodes") or {}).items():
            path = ("node_groups", group_name, "nodes", host)
            if host not in produced:
                yield Finding("unknown-node", f"{host} is not a node of group {group_name}",
                              path, hint=_did_you_mean(host, sorted(produced)[:50]))
                continue
            networks = group.get("networks", list(plan["networks"]))
            for net, address in ((override or {}).get("address") or {}).items():
                if net not in networks:
                    yield Finding("unknown-reference", f"{host} is not on network {net}",
                                  (*path, "address", net),
                                  hint=_did_you_mean(net, networks))
                elif (net, address) in pins:
                    yield Finding("duplicate-address", f"{address} is pinned for both "
                                  f"{pins[(net, address)]} and {host}", (*path, "address", net))
                else:
                    pins[(net, address)] = host
                    # refused here too, so `validate --no-lock` and a plan without a lock say so
                    refusal = _pin_refusal(plan, net, str(address), (*path, "address", net))
                    if refusal is not None:
                        yield refusal


def _pin_refusal(plan: Plan, net: str, pin: str, path: tuple[Any, ...]) -> Finding | None:
    try:
        space = network_space(net, plan["networks"][net])
    except AddressError:
        return None  # reported by check_networks
    return pin_refusal(space, pin, path)


def check_references(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    topo = normalize(plan["topology"])
    racks_declared = plan.get("racks")
    served = rack_switches(topo)
    racks = set(racks_declared) if racks_declared is not None else set(served)
    hardware = plan["hardware"]
    networks = list(plan["networks"])
    catalog = load_catalog()
    for name, group in plan["node_groups"].items():
        path = ("node_groups", name)
        if group["hardware"] not in hardware:
            yield _missing("hardware profile", group["hardware"], list(hardware),
                           (*path, "hardware"))
        if "rack" in group and "racks" in group:
            yield Finding("conflicting-keys", "give rack or racks, not both", (*path, "racks"))
        if "rack" not in group and "racks" not in group:
            yield Finding("missing-key", "a node group needs rack or racks", path)
        for i, rack in enumerate(group.get("racks", [group["rack"]] if "rack" in group else [])):
            if rack not in racks:
                yield _missing("rack", rack, sorted(racks),
                               (*path, "racks", i) if "racks" in group else (*path, "rack"))
        for host, override in (group.get("nodes") or {}).items():
            rack = (override or {}).get("rack")
            if rack and rack not in racks:
                yield _missing("rack", rack, sorted(racks), (*path, "nodes", host, "rack"))
        for i, net in enumerate(group.get("networks", [])):
            if net not in networks:
                yield _missing("network", net, networks, (*path, "networks", i))
    for name, profile in hardware.items():
        accel = profile.get("accelerators")
        if accel and accel["model"] not in catalog:
            yield _missing("accelerator model", accel["model"], sorted(catalog),
                           ("hardware", name, "accelerators", "model"))
        for i, nic in enumerate(profile.get("nics", [])):
            for j, net in enumerate(nic.get("networks", [])):
                if net not in networks:
                    yield _missing("network", net, networks,
                                   ("hardware", name, "nics", i, "networks", j))
    mgmt = plan["cluster"].get("management_network")
    if mgmt and mgmt not in networks:
        yield _missing("network", mgmt, networks, ("cluster", "management_network"))
    for i, net in enumerate(plan.get("acceptance", {}).get("network", {}).get("networks", [])):
        if net not in networks:
            yield _missing("network", net, networks, ("acceptance", "network", "networks", i))
    ceph = plan.get("storage", {}).get("ceph", {})
    for key in ("public_network", "cluster_network"):
        if key in ceph and ceph[key] not in networks:
            yield _missing("network", ceph[key], networks, ("storage", "ceph", key))
    hosts = {node.name for node in nodes}
    nfs = plan.get("storage", {}).get("nfs")
    if nfs:
        if nfs["server"] not in hosts:
            yield _missing("host", nfs["server"], sorted(hosts)[:50], ("storage", "nfs", "server"))
        for i, export in enumerate(nfs.get("exports", [])):
            if export["network"] not in networks:
                yield _missing("network", export["network"], networks,
                               ("storage", "nfs", "exports", i, "network"))
    backups = plan.get("backups")
    if backups and backups["target"]["host"] not in hosts:
        yield _missing("host", backups["target"]["host"], sorted(hosts)[:50],
                       ("backups", "target", "host"))
    if racks_declared is not None:
        for rack in sorted(set(served) - set(racks_declared)):
            switch = served[rack][0]
            yield _missing("rack", rack, sorted(racks_declared),
                           ("topology", "access", switch, "racks"))


def check_topology(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    topo = normalize(plan["topology"])
    level_of: dict[str, str] = {}
    for level in ("core", "aggregation", "access"):
        for name in topo[level]:
            if name in level_of:
                yield Finding("duplicate-switch", f"switch {name} is both {level_of[name]} and "
                              f"{level}; switch names must be unique", ("topology", level, name))
            level_of.setdefault(name, level)
    for name, agg in topo["aggregation"].items():
        for i, core in enumerate(agg["uplinks"]):
            if core not in topo["core"]:
                hint = ("uplinks of an aggregation switch go to core switches"
                        if core in level_of else _did_you_mean(core, list(topo["core"])))
                yield Finding("topology-not-a-tree" if core in level_of else "unknown-reference",
                              f"core switch {core!r} is not defined", ("topology", "aggregation",
                                                                       name, "uplinks", i),
                              hint=hint)
    used_aggs = set()
    for name, access in topo["access"].items():
        path = ("topology", "access", name)
        uplink = access["uplink"]
        used_aggs.add(uplink)
        if uplink not in topo["aggregation"]:
            hint = ("an access switch uplinks to an aggregation switch"
                    if uplink in level_of else _did_you_mean(uplink, list(topo["aggregation"])))
            yield Finding("topology-not-a-tree" if uplink in level_of else "unknown-reference",
                          f"aggregation switch {uplink!r} is not defined", (*path, "uplink"),
                          hint=hint)
        if not access["racks"]:
            yield Finding("missing-key", "an access switch serves rack or racks", path)
    for name in topo["aggregation"]:
        if name not in used_aggs:
            yield Finding("unused-switch", f"aggregation switch {name} has no access switches",
                          ("topology", "aggregation", name), severity="warning")
    served = rack_switches(topo)
    for rack, switches in served.items():
        if len(switches) > 1:
            yield Finding("rack-multihomed", f"rack {rack} is served by {', '.join(switches)}; "
                          "each rack hangs off one access switch",
                          ("topology", "access", switches[1], "racks"))
    racks = set(plan.get("racks") or served)
    used_racks = {node.rack for node in nodes if node.rack}
    for rack in sorted(racks | used_racks):
        if rack not in served:
            where: tuple[str, ...] = (("racks", rack) if rack in (plan.get("racks") or {})
                                      else ("topology", "access"))
            yield Finding("rack-without-switch", f"rack {rack} has no access switch", where,
                          hint="add it to an access switch's racks")
    # Oversubscription: a warning, since many sites accept 3:1 at the access layer.
    per_rack = Counter(node.rack for node in nodes)
    for name, access in topo["access"].items():
        hosts = sum(per_rack[rack] for rack in access["racks"])
        uplink = access.get("uplink_gbps")
        if uplink and hosts:
            ratio = hosts * access["link_gbps"] / uplink
            if ratio > 3:
                yield Finding("oversubscribed", f"access switch {name} carries {hosts} x "
                              f"{access['link_gbps']} Gb/s on {uplink} Gb/s of uplink "
                              f"({ratio:.1f}:1)", ("topology", "access", name, "uplink_gbps"),
                              severity="warning", hint="suppress with a reason if intended")


def check_accelerators(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    catalog = load_catalog()
    in_use = {n.hardware for n in nodes}
    for name, profile in plan["hardware"].items():
        accel = profile.get("accelerators")
        if not accel or accel["model"] not in catalog:
            continue
        entry = catalog[accel["model"]]
        path = ("hardware", name, "accelerators")
        if entry["vendor"] != "nvidia" and name in in_use:
            yield Finding("driver-not-managed", f"{accel['model']} accelerators are scheduled, "
                          "but their driver is not installed by this project", (*path, "model"),
                          severity="warning", hint="install it yourself, or suppress with a "
                          "reason")
        pin = accel.get("driver_branch")
        if pin is not None:
            low, high = entry.get("min_driver_branch"), entry.get("max_driver_branch")
            if entry["vendor"] != "nvidia":
                yield Finding("driver-pin", f"{accel['model']} has no NVIDIA driver to pin",
                              (*path, "driver_branch"))
            elif low and pin < low:
                yield Finding("driver-pin", f"driver branch {pin} is too old for "
                              f"{accel['model']}, which needs {low} or newer",
                              (*path, "driver_branch"))
            elif high and pin > high:
                yield Finding("driver-pin", f"driver branch {pin} no longer supports "
                              f"{accel['model']} (last: {high})", (*path, "driver_branch"))


def _pool_nodes(nodes: list[Node]) -> dict[str, list[Node]]:
    pools: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        if node.pool:
            pools[node.pool].append(node)
    return pools


def check_scheduler(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    scheduler = plan.get("scheduler")
    roles = Counter(role for node in nodes for role in node.roles)
    if not scheduler:
        return
    kind = scheduler["type"]
    if kind not in ("slurm", "kubernetes"):
        return  # the schema says so; guessing at its rules would only add noise
    catalog = load_catalog()
    hardware = plan["hardware"]
    if kind == "slurm":
        count = roles["slurm_controller"]
        if count not in (1, 2):
            yield Finding("controller-count", f"Slurm needs one controller (or an HA pair); the "
                          f"plan has {count}", ("scheduler", "type"),
                          hint="give one node group the role slurm_controller")
        if not roles["slurm_compute"]:
            yield Finding("no-compute", "no node has the role slurm_compute",
                          ("scheduler", "type"), severity="warning")
        if scheduler.get("slurm", {}).get("accounting") and not roles["slurmdbd"]:
            yield Finding("missing-role", "accounting needs a node with the role slurmdbd",
                          ("scheduler", "slurm", "accounting"))
        wrong = [r for r in roles if r.startswith("k8s_")]
    else:
        count = roles["k8s_control_plane"]
        if count == 0 or count % 2 == 0:
            yield Finding("control-plane-count", f"Kubernetes needs an odd number of "
                          f"control-plane nodes for etcd quorum; the plan has {count}",
                          ("scheduler", "type"))
        wrong = [r for r in roles if r.startswith("slurm")]
    for role in wrong:
        group = next(n.group for n in nodes if role in n.roles)
        yield Finding("role-scheduler-mismatch", f"role {role} does not fit scheduler {kind}",
                      ("node_groups", group, "roles"))
    pools = _pool_nodes(nodes)
    known_pools = sorted({g.get("pool") for g in plan["node_groups"].values() if g.get("pool")})
    defaults = []
    for name, wclass in (scheduler.get("workload_classes") or {}).items():
        path = ("scheduler", "workload_classes", name)
        if wclass.get("default"):
            defaults.append(name)
        pool = wclass["pool"]
        if pool not in known_pools:
            yield _missing("pool", pool, known_pools, (*path, "pool"))
            continue
        members = pools.get(pool, [])
        if not members:
            yield Finding("empty-pool", f"pool {pool} has no nodes", (*path, "pool"))
            continue
        needs = wclass.get("needs", "any")
        for node in members:
            accel = hardware.get(node.hardware, {}).get("accelerators")
            entry = catalog.get(accel["model"], {}) if accel else {}
            lacking = ((needs == "gpu" and entry.get("vendor") != "nvidia")
                       or (needs == "accelerator" and not accel))
            if lacking:
                what = "NVIDIA GPUs" if needs == "gpu" else "accelerators"
                yield Finding("pool-lacks-accelerator", f"class {name} needs {what}, but "
                              f"pool {pool} has {node.name} ({node.hardware}) without them",
                              (*path, "needs"))
                break
    if len(defaults) > 1:
        yield Finding("multiple-defaults", f"classes {', '.join(defaults)} are all default",
                      ("scheduler", "workload_classes", defaults[1], "default"))
    elif scheduler.get("workload_classes") and not defaults:
        yield Finding("no-default-class", "no workload class is the default; work that "
                      "declares no class has nowhere to go", ("scheduler", "workload_classes"),
                      severity="warning")
    topo_racks = set(plan.get("racks") or rack_switches(normalize(plan["topology"])))
    for name, dataset in (scheduler.get("datasets") or {}).items():
        for i, rack in enumerate(dataset["racks"]):
            if rack not in topo_racks:
                yield _missing("rack", rack, sorted(topo_racks),
                               ("scheduler", "datasets", name, "racks", i))
    hosts = {n.name for n in nodes}
    for name, reservation in (scheduler.get("reservations") or {}).items():
        path = ("scheduler", "reservations", name)
        try:
            datetime.fromisoformat(reservation["start"])
        except ValueError:
            yield Finding("format", f"start {reservation['start']!r} is not an ISO 8601 time",
                          (*path, "start"), hint="e.g. \"2027-01-05T02:00:00\"")
        for i, group in enumerate(reservation.get("node_groups", [])):
            if group not in plan["node_groups"]:
                yield _missing("node group", group, list(plan["node_groups"]),
                               (*path, "node_groups", i))
        for i, host in enumerate(reservation.get("nodes", [])):
            if host not in hosts:
                yield _missing("host", host, sorted(hosts)[:50], (*path, "nodes", i))
        if not reservation.get("node_groups") and not reservation.get("nodes"):
            yield Finding("missing-key", "a reservation needs node_groups or nodes", path)


def check_ceph(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    ceph = plan.get("storage", {}).get("ceph")
    osds = [n for n in nodes if "ceph_osd" in n.roles]
    mons = [n for n in nodes if "ceph_mon" in n.roles]
    if not ceph and not osds and not mons:
        return
    # point at storage.ceph, or, in a plan without one, at the roles that make up Ceph
    where: tuple[Any, ...] = ("storage", "ceph") if ceph else (
        "node_groups", (mons or osds)[0].group, "roles")
    if not mons:
        yield Finding("ceph-monitors", "Ceph needs monitors; no node has the role ceph_mon",
                      where)
    elif len(mons) % 2 == 0:
        yield Finding("ceph-monitors", f"{len(mons)} Ceph monitors: use an odd number so a "
                      "quorum survives a split", where)
    elif len(mons) == 1 and osds:
        yield Finding("ceph-monitors", "one Ceph monitor is a single point of failure",
                      where, severity="warning")
    domain = (ceph or {}).get("failure_domain", "host")
    row_of = {r: spec.get("row", r) for r, spec in (plan.get("racks") or {}).items()}
    key: Callable[[Node], Any] = {
        "host": lambda n: n.name, "rack": lambda n: n.rack,
        "row": lambda n: row_of.get(n.rack or "", n.rack)}[domain]
    domains = {key(n) for n in osds}
    for i, pool in enumerate((ceph or {}).get("pools", [])):
        path = ("storage", "ceph", "pools", i)
        if pool["size"] > len(domains):
            yield Finding("ceph-failure-domains", f"pool {pool['name']} keeps {pool['size']} "
                          f"replicas in distinct {domain}s, but the OSD nodes span only "
                          f"{len(domains)}", (*path, "size"),
                          hint=f"add OSD nodes in more {domain}s, or lower size")
        if pool.get("min_size", 1) > pool["size"]:
            yield Finding("ceph-min-size", "min_size is larger than size", (*path, "min_size"))
    if osds:
        profiles = {n.hardware for n in osds}
        # an unknown profile is reported as such; it has no disks to look at
        for profile in sorted(p for p in profiles if isinstance(p, str) and p in plan["hardware"]):
            disks = plan["hardware"][profile].get("disks", [])
            if not any(d.get("use") == "osd" for d in disks):
                yield Finding("ceph-no-osd-disk", f"hardware {profile} of OSD nodes has no disk "
                              "with use: osd", ("hardware", profile, "disks"))


def check_acceptance(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    network_acc = plan.get("acceptance", {}).get("network", {})
    min_gbps = network_acc.get("min_gbps")
    if min_gbps is None:
        return
    topo = normalize(plan["topology"])
    link_of_rack = {rack: sw["link_gbps"] for sw in topo["access"].values()
                    for rack in sw["racks"]}
    tested = network_acc.get("networks") or list(plan["networks"])[1:] or list(plan["networks"])
    for net in tested:
        spec = plan["networks"].get(net)
        if spec is None:
            continue
        mtu = spec.get("mtu", 1500)
        efficiency = GOODPUT_9000 if mtu >= 9000 else GOODPUT_1500
        # a host's link is as fast as the slower of its switch port and its NIC
        nic_speed = {name: min((nic["speed_gbps"] for nic in profile.get("nics", [])
                                if net in nic.get("networks", []) and "speed_gbps" in nic),
                               default=None)
                     for name, profile in plan["hardware"].items()}
        speeds = {min(link_of_rack[n.rack], nic_speed.get(n.hardware) or link_of_rack[n.rack])
                  for n in nodes if net in n.networks and n.rack in link_of_rack}
        if not speeds:
            continue
        slowest = min(speeds)
        ceiling = slowest * efficiency
        if min_gbps > round(ceiling, 6):  # 10 * 0.94 is 9.399999999999999 in floats
            yield Finding("threshold-above-line-rate", f"min_gbps {min_gbps} is above what a "
                          f"{slowest:g} Gb/s link carries as TCP goodput at MTU {mtu} "
                          f"(about {ceiling:.2f} Gb/s)", ("acceptance", "network", "min_gbps"),
                          hint=f"at most {ceiling:.2f}, or faster links")


ALL_CHECKS: tuple[Check, ...] = (
    check_networks, check_capacity, check_nodes, check_references, check_topology,
    check_accelerators, check_scheduler, check_ceph, check_acceptance,
)
