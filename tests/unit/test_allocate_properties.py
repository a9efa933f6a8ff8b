"""Property: random sequences of plan edits never move a surviving host.

Edits: add, remove and reorder node groups, shrink and grow them back, pin free addresses,
add and remove racks of a group, move the gateway and widen the reserved range (perhaps over a
host), each locked with or without --reclaim, and with or without --allow-moves. Whatever the
sequence, a surviving host keeps its address and its rack unless the plan forces a move and
moves were allowed; a host that comes back gets its held-back address and rack; no address is
handed out twice, nor a freed address to another host unless reclaimed; and a forced move
without --allow-moves is refused with a finding, the lock left as it was.
"""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster_plan.plan.allocate import build_lock
from cluster_plan.plan.defaults import with_defaults
from cluster_plan.plan.networks import network_space, to_text
from cluster_plan.plan.nodes import iter_nodes
from cluster_plan.plan.placement import place_racks

BASE_NETWORKS = {
    # small networks, so that edits run them full now and then
    "mgmt": {"cidr": "10.0.0.0/26", "gateway": "10.0.0.1", "reserved": ["10.0.0.2-10.0.0.5"]},
    "data": {"cidr": "10.1.0.0/27"},
}
NAMES = [f"g{i}" for i in range(5)]  # a small pool, so removed groups come back
RACKS = ["r1", "r2", "r3", "r4"]
REFUSALS = {"locked-address-lost", "rack-move"}


def usable(networks: dict[str, Any], net: str) -> set[str]:
    space = network_space(net, networks[net])
    return {
        to_text(a) for a in range(space.first_host, space.last_host + 1) if a not in space.reserved
    }


def build_plan(groups: list[dict[str, Any]], networks: dict[str, Any]) -> dict[str, Any]:
    node_groups = {}
    for group in groups:
        spec: dict[str, Any] = {
            "count": group["count"],
            "hostname": group["name"] + "n{n}",
            "hardware": "cpu",
            "racks": list(group["racks"]),
        }
        if group["mgmt_only"]:
            spec["networks"] = ["mgmt"]
        if group["pins"]:
            spec["nodes"] = {host: {"address": dict(pins)} for host, pins in group["pins"].items()}
        node_groups[group["name"]] = spec
    return {"networks": networks, "node_groups": node_groups}


class Model:
    """What the allocator has promised so far, kept independently of its lock file."""

    def __init__(self) -> None:
        self.lock: dict[str, Any] | None = None
        self.addresses: dict[str, dict[str, str]] = {net: {} for net in BASE_NETWORKS}
        self.freed: dict[str, dict[str, str]] = {net: {} for net in BASE_NETWORKS}  # addr->host
        self.racks: dict[str, str] = {}
        self.left_racks: dict[str, str] = {}

    def check_addresses(
        self, plan: dict[str, Any], lock: dict[str, Any], reclaim: bool, moved: set[str]
    ) -> None:
        nodes = list(iter_nodes(with_defaults(plan)))
        for net in BASE_NETWORKS:
            hosts = lock["networks"][net]["hosts"]
            members = {node.name for node in nodes if net in node.networks}
            assert set(hosts) == members
            assert len(set(hosts.values())) == len(hosts), "duplicate address"
            allowed = usable(plan["networks"], net)
            for host, address in hosts.items():
                assert address in allowed, (host, address)
            pins = {node.name: node.pins[net] for node in nodes if net in node.pins}
            for host, pin in pins.items():
                assert hosts[host] == pin
            old = self.addresses[net]
            for host, address in hosts.items():
                if host in old and host not in pins and host not in moved:
                    assert address == old[host], f"{host} renumbered on {net}"
            freed = {} if reclaim else self.freed[net]
            for host, address in hosts.items():
                if host in old or host in pins:
                    continue
                if address in freed:
                    assert freed[address] == host, f"{host} got {freed[address]}'s address"
                held = [a for a, h in freed.items() if h == host and a in allowed]
                if held and not set(held) & set(pins.values()):
                    assert address in held, f"{host} came back without its address"
            now = set(hosts.values())
            left = {} if reclaim else {a: h for h, a in old.items() if a not in now}
            # An address the plan has since reserved (or made the gateway) is nobody's any more:
            # the operator claimed it, so no hold survives on it, even when it is freed again.
            self.freed[net] = {
                a: h for a, h in {**freed, **left}.items() if a not in now and a in allowed
            }
            self.addresses[net] = dict(hosts)

    def check_racks(self, plan: dict[str, Any], lock: dict[str, Any], moved: set[str]) -> None:
        placed = lock["racks"]["hosts"]
        for node in iter_nodes(with_defaults(plan)):
            group_racks = plan["node_groups"][node.group]["racks"]
            rack = placed[node.name]
            assert rack in group_racks
            if node.name in self.racks and node.name not in moved:
                assert rack == self.racks[node.name], f"{node.name} changed rack"
            elif node.name in self.left_racks and self.left_racks[node.name] in group_racks:
                assert rack == self.left_racks[node.name], f"{node.name} came back elsewhere"
        for host, rack in self.racks.items():
            if host not in placed:
                self.left_racks[host] = rack
        for host in placed:  # back again: where it stood before no longer binds it
            self.left_racks.pop(host, None)
        self.racks = dict(placed)


EDITS = st.sampled_from(
    [
        "add",
        "remove",
        "reorder",
        "shrink",
        "grow",
        "pin",
        "add-rack",
        "drop-rack",
        "gateway",
        "reserve",
    ]
)


def _edit(
    data: Any, kind: str, draft: list[dict[str, Any]], networks: dict[str, Any], model: Model
) -> None:
    if kind == "add":
        free_names = [n for n in NAMES if n not in {g["name"] for g in draft}]
        if free_names:
            draft.insert(
                data.draw(st.integers(0, len(draft))),
                {
                    "name": data.draw(st.sampled_from(free_names)),
                    "count": data.draw(st.integers(0, 6)),
                    "mgmt_only": data.draw(st.booleans()),
                    "pins": {},
                    "racks": data.draw(
                        st.lists(st.sampled_from(RACKS), min_size=1, max_size=3, unique=True)
                    ),
                },
            )
        return
    if not draft:
        return
    group = data.draw(st.sampled_from(draft))
    if kind == "remove":
        draft.remove(group)
    elif kind == "reorder":
        draft[:] = data.draw(st.permutations(draft))
    elif kind in ("shrink", "grow"):
        step = data.draw(st.integers(1, 4))
        group["count"] = max(0, group["count"] + (step if kind == "grow" else -step))
        group["pins"] = {
            h: p for h, p in group["pins"].items() if int(h.rsplit("n", 1)[1]) <= group["count"]
        }
    elif kind == "pin" and group["count"]:
        host = f"{group['name']}n{data.draw(st.integers(1, group['count']))}"
        net = "mgmt" if group["mgmt_only"] else data.draw(st.sampled_from(list(networks)))
        held = set(model.addresses[net].values())
        candidates = sorted(usable(networks, net) - held)
        if candidates:
            group["pins"].setdefault(host, {})[net] = data.draw(st.sampled_from(candidates))
    elif kind == "add-rack":
        spare = [r for r in RACKS if r not in group["racks"]]
        if spare:
            group["racks"].append(data.draw(st.sampled_from(spare)))
    elif kind == "drop-rack" and len(group["racks"]) > 1:
        group["racks"].remove(data.draw(st.sampled_from(group["racks"])))
    elif kind == "gateway":
        # perhaps onto an address a host holds: that must be refused, or moved on request
        networks["mgmt"]["gateway"] = data.draw(st.sampled_from(sorted(usable(networks, "mgmt"))))
    elif kind == "reserve":
        last = data.draw(st.integers(6, 20))
        networks["mgmt"]["reserved"] = [f"10.0.0.2-10.0.0.{last}"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), steps=st.integers(min_value=1, max_value=14))
def test_edits_never_move_survivors_or_duplicate(data, steps):
    groups: list[dict[str, Any]] = []
    networks = copy.deepcopy(BASE_NETWORKS)
    model = Model()
    for _ in range(steps):
        draft = copy.deepcopy(groups)
        new_networks = copy.deepcopy(networks)
        kind = data.draw(EDITS) if draft else "add"
        _edit(data, kind, draft, new_networks, model)
        plan = build_plan(draft, new_networks)
        reclaim = data.draw(st.booleans())
        allow_moves = data.draw(st.booleans())
        nodes, rack_refusals, rack_moves = place_racks(
            plan, list(iter_nodes(with_defaults(plan))), model.lock, allow_moves=allow_moves
        )
        lock, findings, moves = build_lock(
            plan, nodes, model.lock, reclaim=reclaim, allow_moves=allow_moves
        )
        findings += rack_refusals
        if findings:
            codes = {f.code for f in findings}
            # a full network, a pin another new host of this step wanted, or a move the plan
            # forces without --allow-moves: the lock is not written, the edit is undone
            assert codes <= {
                "network-full",
                "pinned-address-taken",
                "pinned-address-reserved",
                *REFUSALS,
            }
            assert not (codes & REFUSALS) or not allow_moves
            continue
        moved = {m.split(" ", 1)[0].rstrip(":") for m in [*moves, *rack_moves]}
        assert not moved or allow_moves
        model.check_addresses(plan, lock, reclaim, moved)
        model.check_racks(plan, lock, moved)
        model.lock = lock
        groups, networks = draft, new_networks
        # locking again from the new lock changes nothing
        again_nodes, refusals, _ = place_racks(plan, list(iter_nodes(with_defaults(plan))), lock)
        again, findings, moves = build_lock(plan, again_nodes, lock)
        assert (again, findings, moves, refusals) == (lock, [], [], [])


def test_a_network_of_the_model_is_what_the_plan_says():
    # the model's own arithmetic, checked once against the standard library
    got = usable(BASE_NETWORKS, "mgmt")
    network = ipaddress.ip_network("10.0.0.0/26")
    held = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"}
    assert got == {str(a) for a in network.hosts()} - held
