"""Stable address allocation: survivors keep their addresses, pins are honoured or refused,
freed addresses are held back unless reclaimed, a full network is a finding."""

from __future__ import annotations

import ipaddress
from typing import Any

from cluster_plan.plan.allocate import allocate_addresses, build_lock
from cluster_plan.plan.defaults import with_defaults
from cluster_plan.plan.lockfile import lock_differences
from cluster_plan.plan.nodes import iter_nodes


def make_plan(
    groups: dict[str, dict[str, Any]], cidr: str = "10.0.0.0/24", **net: Any
) -> dict[str, Any]:
    plan_groups = {}
    for name, spec in groups.items():
        plan_groups[name] = {
            "hostname": f"{name}{{n:02d}}",
            "hardware": "cpu",
            "rack": "r1",
            **spec,
        }
    return {"networks": {"mgmt": {"cidr": cidr, **net}}, "node_groups": plan_groups}


def allocate(plan, previous=None, reclaim=False):
    lock, findings = allocate_addresses(
        plan, list(iter_nodes(with_defaults(plan))), previous, reclaim=reclaim
    )
    return lock, [(f.code, f.json_path) for f in findings]


def hosts(lock, net="mgmt"):
    return lock["networks"][net]["hosts"]


def ip(text):
    return ipaddress.ip_address(text)


def test_fresh_allocation_skips_network_gateway_dns_and_reserved():
    plan = make_plan(
        {"a": {"count": 3}}, gateway="10.0.0.1", dns=["10.0.0.3"], reserved=["10.0.0.4-10.0.0.5"]
    )
    lock, findings = allocate(plan)
    assert findings == []
    # .0 is the network address, .1 the gateway, .3 DNS, .4-.5 reserved
    assert hosts(lock) == {"a01": "10.0.0.2", "a02": "10.0.0.6", "a03": "10.0.0.7"}
    assert lock["networks"]["mgmt"]["cidr"] == "10.0.0.0/24"
    assert lock["networks"]["mgmt"]["released"] == {}


def test_reserved_as_a_count_holds_back_the_first_addresses():
    lock, _ = allocate(make_plan({"a": {"count": 1}}, reserved=10))
    assert hosts(lock) == {"a01": "10.0.0.11"}


def test_allocating_again_from_the_lock_changes_nothing():
    plan = make_plan({"a": {"count": 3}, "b": {"count": 2}})
    lock, _ = allocate(plan)
    again, findings = allocate(plan, lock)
    assert (again, findings) == (lock, [])
    assert lock_differences(lock, again) == []


def test_survivors_keep_addresses_when_a_group_is_inserted_first_or_groups_reordered():
    plan = make_plan({"a": {"count": 2}, "b": {"count": 2}})
    lock, _ = allocate(plan)
    grown = make_plan({"new": {"count": 3}, "b": {"count": 2}, "a": {"count": 2}})
    after, findings = allocate(grown, lock)
    assert findings == []
    for host, address in hosts(lock).items():
        assert hosts(after)[host] == address
    assert len(set(hosts(after).values())) == 7


def test_removed_host_address_is_released_and_not_reused():
    lock, _ = allocate(make_plan({"a": {"count": 3}}))
    freed = hosts(lock)["a02"]
    lock2, _ = allocate(
        make_plan({"a": {"count": 1}, "z": {"start": 3, "count": 1, "hostname": "a{n:02d}"}}), lock
    )
    assert "a02" not in hosts(lock2)
    assert lock2["networks"]["mgmt"]["released"] == {freed: "a02"}
    # a new host does not get the freed address, now or later
    lock3, _ = allocate(
        make_plan(
            {
                "a": {"count": 1},
                "z": {"start": 3, "count": 1, "hostname": "a{n:02d}"},
                "b": {"count": 2},
            }
        ),
        lock2,
    )
    assert freed not in hosts(lock3).values()
    assert lock3["networks"]["mgmt"]["released"] == {freed: "a02"}
    assert hosts(lock3)["a01"] == hosts(lock)["a01"]
    assert hosts(lock3)["a03"] == hosts(lock)["a03"]


def test_reclaim_reuses_freed_addresses():
    lock, _ = allocate(make_plan({"a": {"count": 3}}))
    freed = hosts(lock)["a03"]
    lock2, _ = allocate(make_plan({"a": {"count": 2}}), lock)
    lock3, _ = allocate(make_plan({"a": {"count": 2}, "b": {"count": 1}}), lock2, reclaim=True)
    assert hosts(lock3)["b01"] == freed
    assert lock3["networks"]["mgmt"]["released"] == {}


def test_pin_on_a_free_address_is_honoured():
    plan = make_plan({"a": {"count": 2, "nodes": {"a02": {"address": {"mgmt": "10.0.0.77"}}}}})
    lock, findings = allocate(plan)
    assert findings == []
    assert hosts(lock) == {"a01": "10.0.0.1", "a02": "10.0.0.77"}


def test_pin_may_take_back_a_freed_address():
    lock, _ = allocate(make_plan({"a": {"count": 2}}))
    freed = hosts(lock)["a02"]
    lock2, _ = allocate(make_plan({"a": {"count": 1}}), lock)
    assert freed in lock2["networks"]["mgmt"]["released"]
    plan = make_plan(
        {"a": {"count": 1}, "b": {"count": 1, "nodes": {"b01": {"address": {"mgmt": freed}}}}}
    )
    lock3, findings = allocate(plan, lock2)
    assert findings == []
    assert hosts(lock3)["b01"] == freed
    assert freed not in lock3["networks"]["mgmt"]["released"]


def _pinned(address: str) -> dict[str, Any]:
    return make_plan(
        {"a": {"count": 2, "nodes": {"a01": {"address": {"mgmt": address}}}}},
        cidr="10.0.0.0/24",
        gateway="10.0.0.254",
        reserved=["10.0.0.100/30"],
    )


PIN_PATH = "$.node_groups.a.nodes.a01.address.mgmt"


def test_pins_that_can_never_be_had_are_refused():
    assert allocate(_pinned("10.0.1.5"))[1] == [("pinned-address-outside", PIN_PATH)]
    assert allocate(_pinned("10.0.0.0"))[1] == [("pinned-address-outside", PIN_PATH)]
    assert allocate(_pinned("10.0.0.255"))[1] == [("pinned-address-outside", PIN_PATH)]
    assert allocate(_pinned("10.0.0.254"))[1] == [("pinned-address-reserved", PIN_PATH)]
    assert allocate(_pinned("10.0.0.102"))[1] == [("pinned-address-reserved", PIN_PATH)]
    assert allocate(_pinned("10.0.0.999"))[1] == [("pinned-address", PIN_PATH)]


def test_pin_on_an_address_a_survivor_holds_is_refused_and_the_survivor_keeps_it():
    lock, _ = allocate(make_plan({"a": {"count": 2}}))
    held = hosts(lock)["a02"]
    plan = make_plan({"a": {"count": 2, "nodes": {"a01": {"address": {"mgmt": held}}}}})
    lock2, findings = allocate(plan, lock)
    assert findings == [("pinned-address-taken", "$.node_groups.a.nodes.a01.address.mgmt")]
    assert hosts(lock2)["a02"] == held


def test_a_host_moved_by_a_pin_frees_its_old_address_for_nobody_else():
    lock, _ = allocate(make_plan({"a": {"count": 2}}))
    old = hosts(lock)["a01"]
    plan = make_plan(
        {"a": {"count": 2, "nodes": {"a01": {"address": {"mgmt": "10.0.0.50"}}}}, "b": {"count": 1}}
    )
    lock2, findings = allocate(plan, lock)
    assert findings == []
    assert hosts(lock2)["a01"] == "10.0.0.50"
    assert hosts(lock2)["a02"] == hosts(lock)["a02"]
    # the old address may still be configured on a01 until it is re-provisioned
    assert hosts(lock2)["b01"] != old
    lock3, _ = allocate(
        make_plan(
            {
                "a": {"count": 2, "nodes": {"a01": {"address": {"mgmt": "10.0.0.50"}}}},
                "b": {"count": 2},
            }
        ),
        lock2,
    )
    assert old not in hosts(lock3).values()


def test_full_network_is_a_finding():
    # a /29 has six host addresses
    lock, findings = allocate(make_plan({"a": {"count": 8}}, cidr="10.0.0.0/29"))
    assert findings == [("network-full", "$.networks.mgmt.cidr")]
    assert len(hosts(lock)) == 6


def test_full_network_hint_mentions_reclaim_when_addresses_are_held_back():
    plan = make_plan({"a": {"count": 6}}, cidr="10.0.0.0/29")
    lock, _ = allocate(plan)
    lock2, _ = allocate(make_plan({"a": {"count": 5}}, cidr="10.0.0.0/29"), lock)
    grown = make_plan({"a": {"count": 5}, "b": {"count": 1}}, cidr="10.0.0.0/29")
    nodes = list(iter_nodes(with_defaults(grown)))
    _, findings = allocate_addresses(grown, nodes, lock2)
    assert [f.code for f in findings] == ["network-full"]
    assert "--reclaim" in (findings[0].hint or "")
    lock3, findings = allocate_addresses(grown, nodes, lock2, reclaim=True)
    assert findings == []
    assert len(set(hosts(lock3).values())) == 6


def test_small_networks():
    lock, findings = allocate(make_plan({"a": {"count": 2}}, cidr="10.0.0.8/31"))
    assert findings == []
    assert sorted(hosts(lock).values()) == ["10.0.0.8", "10.0.0.9"]  # RFC 3021
    lock, findings = allocate(make_plan({"a": {"count": 1}}, cidr="10.0.0.8/32"))
    assert (hosts(lock), findings) == ({"a01": "10.0.0.8"}, [])


def test_hosts_only_get_addresses_on_their_networks():
    plan = make_plan({"a": {"count": 1}, "b": {"count": 1, "networks": ["mgmt"]}})
    plan["networks"]["data"] = {"cidr": "10.1.0.0/24"}
    lock, _ = allocate(plan)
    assert set(hosts(lock, "mgmt")) == {"a01", "b01"}
    assert set(hosts(lock, "data")) == {"a01"}
    for net, data in lock["networks"].items():
        cidr = ipaddress.ip_network(data["cidr"])
        assert all(ip(a) in cidr for a in data["hosts"].values()), net


def test_lock_differences_name_what_is_stale():
    plan = make_plan({"a": {"count": 3}})
    lock, _ = allocate(plan)
    fresh, _ = allocate(make_plan({"a": {"count": 2}, "b": {"count": 1}}), lock)
    words = " ".join(lock_differences(lock, fresh))
    assert "b01" in words
    assert "a03" in words
    moved = {
        **lock,
        "networks": {
            "mgmt": {**lock["networks"]["mgmt"], "hosts": {**hosts(lock), "a01": "10.0.0.99"}}
        },
    }
    assert "a01" in " ".join(lock_differences(moved, lock))
    assert lock_differences({"networks": {}, "racks": lock["racks"]}, lock) == [
        "network mgmt is not in the lock"
    ]
    assert lock_differences({**lock, "racks": None} | {"racks": lock["racks"]}, lock) == []
    v1 = {k: v for k, v in lock.items() if k != "racks"}
    assert lock_differences(v1, lock) == ["the lock does not record racks (a lock of version 1)"]


def test_a_host_that_comes_back_gets_its_held_back_address_on_every_network():
    plan = make_plan({"a": {"count": 3}, "b": {"count": 1}})
    plan["networks"]["data"] = {"cidr": "10.1.0.0/24"}
    lock, _ = allocate(plan)
    shrunk = make_plan({"a": {"count": 1}, "b": {"count": 1}})
    shrunk["networks"]["data"] = {"cidr": "10.1.0.0/24"}
    lock2, _ = allocate(shrunk, lock)
    # meanwhile another group grows: it must not take the held-back addresses
    grown_b = make_plan({"a": {"count": 1}, "b": {"count": 3}})
    grown_b["networks"]["data"] = {"cidr": "10.1.0.0/24"}
    lock3, findings = allocate(grown_b, lock2)
    assert findings == []
    back = make_plan({"a": {"count": 3}, "b": {"count": 3}})
    back["networks"]["data"] = {"cidr": "10.1.0.0/24"}
    lock4, findings = allocate(back, lock3)
    assert findings == []
    for net in ("mgmt", "data"):
        for host in ("a02", "a03"):
            assert hosts(lock4, net)[host] == hosts(lock, net)[host], (net, host)
        assert lock4["networks"][net]["released"] == {}


def test_moving_the_gateway_onto_a_host_is_refused_not_renumbered():
    lock, _ = allocate(make_plan({"a": {"count": 3}}, gateway="10.0.0.254"))
    held = hosts(lock)["a02"]
    plan = make_plan({"a": {"count": 3}}, gateway=held)
    lock2, findings = allocate_addresses(plan, list(iter_nodes(with_defaults(plan))), lock)
    assert [(f.code, f.json_path) for f in findings] == [
        ("locked-address-lost", "$.networks.mgmt.gateway")
    ]
    assert "a02" in findings[0].message and "gateway" in findings[0].message
    assert hosts(lock2) == hosts(lock)  # nothing moved
    # asked for explicitly, the host moves and the move is told
    lock3, findings, moves = build_lock(
        plan, list(iter_nodes(with_defaults(plan))), lock, allow_moves=True
    )
    assert findings == []
    assert hosts(lock3)["a02"] != held
    assert moves == [f"a02 on mgmt: {held} -> {hosts(lock3)['a02']} (now the gateway address)"]
    # the other hosts stay where they were
    assert {h: a for h, a in hosts(lock3).items() if h != "a02"} == {
        h: a for h, a in hosts(lock).items() if h != "a02"
    }


def test_widening_reserved_over_hosts_is_refused_and_names_them():
    lock, _ = allocate(make_plan({"a": {"count": 4}}))
    plan = make_plan({"a": {"count": 4}}, reserved=["10.0.0.1-10.0.0.3"])
    _, findings = allocate_addresses(plan, list(iter_nodes(with_defaults(plan))), lock)
    (finding,) = findings
    assert (finding.code, finding.json_path) == ("locked-address-lost", "$.networks.mgmt.reserved")
    for host in ("a01", "a02", "a03"):
        assert host in finding.message
    assert "a04" not in finding.message
