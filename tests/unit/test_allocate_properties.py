"""Property: random sequences of plan edits (add, remove and reorder node groups, change
counts, pin free addresses, lock with or without --reclaim) never renumber a surviving host,
never produce a duplicate, and never hand a freed address to another host unless reclaimed."""

from __future__ import annotations

import ipaddress
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster_plan.allocate import allocate_addresses
from cluster_plan.nodes import iter_nodes

NETWORKS = {
    # small networks, so that edits run them full now and then
    "mgmt": {"cidr": "10.0.0.0/26", "gateway": "10.0.0.1", "reserved": ["10.0.0.2-10.0.0.5"]},
    "data": {"cidr": "10.1.0.0/27"},
}
NAMES = [f"g{i}" for i in range(6)]  # a small pool, so removed groups come back


def usable(net: str) -> list[str]:
    network = ipaddress.ip_network(NETWORKS[net]["cidr"])
    held = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"}
    return [str(a) for a in network.hosts() if str(a) not in held]


def build_plan(groups: list[dict[str, Any]]) -> dict[str, Any]:
    node_groups = {}
    for group in groups:
        spec: dict[str, Any] = {
            "count": group["count"],
            "hostname": group["name"] + "n{n}",
            "hardware": "cpu",
            "rack": "r1",
        }
        if group["mgmt_only"]:
            spec["networks"] = ["mgmt"]
        if group["pins"]:
            spec["nodes"] = {host: {"address": dict(pins)} for host, pins in group["pins"].items()}
        node_groups[group["name"]] = spec
    return {"networks": NETWORKS, "node_groups": node_groups}


class Model:
    """What the allocator has promised so far, kept independently of its lock file."""

    def __init__(self) -> None:
        self.lock: dict[str, Any] | None = None
        self.addresses: dict[str, dict[str, str]] = {net: {} for net in NETWORKS}
        self.freed: dict[str, set[str]] = {net: set() for net in NETWORKS}

    def check(
        self,
        plan: dict[str, Any],
        lock: dict[str, Any],
        reclaim: bool,
        repinned: set[tuple[str, str]],
    ) -> None:
        nodes = list(iter_nodes(plan))
        for net in NETWORKS:
            network = ipaddress.ip_network(NETWORKS[net]["cidr"])
            hosts = lock["networks"][net]["hosts"]
            members = {node.name for node in nodes if net in node.networks}
            assert set(hosts) == members
            assert len(set(hosts.values())) == len(hosts), "duplicate address"
            for host, address in hosts.items():
                assert address in usable(net), (host, address)
                assert ipaddress.ip_address(address) in network
            old = self.addresses[net]
            for host, address in hosts.items():
                if host in old and (host, net) not in repinned:
                    assert address == old[host], f"{host} renumbered on {net}"
            pins = {node.name: node.pins[net] for node in nodes if net in node.pins}
            for host, pin in pins.items():
                assert hosts[host] == pin
            freed = set() if reclaim else self.freed[net]
            for host, address in hosts.items():
                if host not in old and host not in pins:
                    assert address not in freed, f"freed {address} reused for {host}"
            # what this step frees (addresses of hosts that left, or that a pin moved) is held
            # back from now on; a lock with --reclaim forgets them at once
            now = set(hosts.values())
            left = set() if reclaim else {a for a in old.values() if a not in now}
            self.freed[net] = (freed | left) - now
            self.addresses[net] = dict(hosts)
        self.lock = lock


edit_kinds = st.sampled_from(["add", "remove", "reorder", "count", "pin", "unpin"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), steps=st.integers(min_value=1, max_value=14))
def test_edits_never_renumber_survivors_or_duplicate(data, steps):
    groups: list[dict[str, Any]] = []
    model = Model()
    for _ in range(steps):
        draft = [dict(g, pins={h: dict(p) for h, p in g["pins"].items()}) for g in groups]
        kind = data.draw(edit_kinds) if draft else "add"
        repinned: set[tuple[str, str]] = set()
        if kind == "add":
            free_names = [n for n in NAMES if n not in {g["name"] for g in draft}]
            if not free_names:
                continue
            group = {
                "name": data.draw(st.sampled_from(free_names)),
                "count": data.draw(st.integers(0, 6)),
                "mgmt_only": data.draw(st.booleans()),
                "pins": {},
            }
            draft.insert(data.draw(st.integers(0, len(draft))), group)
        elif kind == "remove":
            draft.pop(data.draw(st.integers(0, len(draft) - 1)))
        elif kind == "reorder":
            draft = data.draw(st.permutations(draft))
        elif kind == "count":
            group = data.draw(st.sampled_from(draft))
            group["count"] = data.draw(st.integers(0, 8))
            group["pins"] = {
                h: p for h, p in group["pins"].items() if int(h.rsplit("n", 1)[1]) <= group["count"]
            }
        elif kind in ("pin", "unpin"):
            group = data.draw(st.sampled_from(draft))
            if not group["count"]:
                continue
            host = f"{group['name']}n{data.draw(st.integers(1, group['count']))}"
            net = "mgmt" if group["mgmt_only"] else data.draw(st.sampled_from(list(NETWORKS)))
            if kind == "unpin":
                group["pins"].pop(host, None)  # the host keeps its address
            else:
                # a free address: held by no host now, and not one that was freed, unless
                # the draw picks a freed one (a pin may take back a freed address)
                held = set(model.addresses[net].values())
                candidates = [a for a in usable(net) if a not in held]
                if not candidates:
                    continue
                group["pins"].setdefault(host, {})[net] = data.draw(st.sampled_from(candidates))
                repinned.add((host, net))
        plan = build_plan(draft)
        reclaim = data.draw(st.booleans())
        lock, findings = allocate_addresses(
            plan, list(iter_nodes(plan)), model.lock, reclaim=reclaim
        )
        if findings:
            # a full network, or a pin on an address another new host of this step wanted:
            # the lock is not written, the edit is undone
            assert {f.code for f in findings} <= {"network-full", "pinned-address-taken"}
            continue
        # a pin on a host that held that very address already is no move
        repinned = {(h, n) for h, n in repinned if model.addresses[n].get(h) is not None}
        model.check(plan, lock, reclaim, repinned)
        groups = draft
        # allocating again from the new lock changes nothing
        again, findings = allocate_addresses(plan, list(iter_nodes(plan)), lock)
        assert (again, findings) == (lock, [])
