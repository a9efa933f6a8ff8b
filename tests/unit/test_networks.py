"""Network arithmetic: addresses, reserved entries, which addresses a network can hand out."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_plan.plan.networks import (
    AddressError,
    AddressRanges,
    network_space,
    parse_address,
    parse_network,
    parse_reserved_entry,
    site_addresses,
    to_text,
)


def n(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


@pytest.mark.parametrize("text", ["10.0.0.1", "0.0.0.0", "255.255.255.255"])
def test_parse_address_round_trips(text):
    assert parse_address(text) == n(text)
    assert to_text(parse_address(text)) == text


@pytest.mark.parametrize(
    "text",
    ["10.0.0.256", "10.0.0", "10.0.0.1.2", "", "ten", "::1", "010.0.0.1x", "10.0.0.1/24", None, 7],
)
def test_parse_address_refuses(text):
    with pytest.raises(AddressError):
        parse_address(text)


def test_parse_network():
    assert str(parse_network("10.40.0.0/24")) == "10.40.0.0/24"
    with pytest.raises(AddressError, match="host bits"):
        parse_network("10.40.0.1/24")
    for bad in ("10.40.0.0/33", "10.40.0.0/x", "nonsense", "fd00::/64"):
        with pytest.raises(AddressError):
            parse_network(bad)


@pytest.mark.parametrize(
    ("entry", "first", "last"),
    [
        ("10.0.0.5", "10.0.0.5", "10.0.0.5"),
        ("10.0.0.1-10.0.0.9", "10.0.0.1", "10.0.0.9"),
        ("10.0.0.1 - 10.0.0.9", "10.0.0.1", "10.0.0.9"),
        ("10.0.0.7-10.0.0.7", "10.0.0.7", "10.0.0.7"),
        ("10.0.0.16/28", "10.0.0.16", "10.0.0.31"),
        ("10.0.0.255-10.0.1.3", "10.0.0.255", "10.0.1.3"),
    ],
)
def test_parse_reserved_entry(entry, first, last):
    assert parse_reserved_entry(entry) == (n(first), n(last))


@pytest.mark.parametrize(
    "entry",
    ["10.0.0.9-10.0.0.1", "10.0.0.17/28", "10.0.0.1-", "x-y", "10.0.0.1-10.0.0.300", "-10.0.0.1"],
)
def test_parse_reserved_entry_refuses(entry):
    with pytest.raises(AddressError):
        parse_reserved_entry(entry)


def test_space_of_a_slash_24():
    space = network_space("mgmt", {"cidr": "10.40.0.0/24"})
    assert (to_text(space.first_host), to_text(space.last_host)) == ("10.40.0.1", "10.40.0.254")
    assert space.usable == 254
    assert not space.contains(n("10.40.0.0"))
    assert not space.contains(n("10.40.0.255"))
    assert space.contains(n("10.40.0.128"))
    assert len(space.reserved) == 0
    assert 0 not in space.reserved


def test_reserved_entries_gateway_and_dns_are_held_back():
    space = network_space(
        "mgmt",
        {
            "cidr": "10.40.0.0/24",
            "gateway": "10.40.0.254",
            "dns": ["10.40.0.2", "192.0.2.53"],
            "ntp": ["10.40.0.3", "pool.ntp.org"],
            "reserved": ["10.40.0.10-10.40.0.12", "10.40.0.32/30", "10.40.0.99"],
        },
    )
    expected = {
        "10.40.0.254",
        "10.40.0.2",
        "10.40.0.3",
        "10.40.0.10",
        "10.40.0.11",
        "10.40.0.12",
        "10.40.0.32",
        "10.40.0.33",
        "10.40.0.34",
        "10.40.0.35",
        "10.40.0.99",
    }
    inside = {to_text(a) for a in space.reserved if space.contains(a)}
    assert inside == expected


def test_reserved_ranges_are_clipped_to_the_network():
    space = network_space(
        "mgmt",
        {"cidr": "10.40.0.0/28", "reserved": ["10.39.255.250-10.40.0.2", "10.40.0.14-10.40.1.0"]},
    )
    assert [to_text(a) for a in sorted(space.reserved)] == [
        "10.40.0.0",
        "10.40.0.1",
        "10.40.0.2",
        "10.40.0.14",
        "10.40.0.15",
    ]


def test_reserved_as_a_count():
    space = network_space("mgmt", {"cidr": "10.40.0.0/24", "reserved": 5})
    assert [to_text(a) for a in sorted(space.reserved)] == [f"10.40.0.{i}" for i in range(1, 6)]
    # never more than the network holds
    space = network_space("mgmt", {"cidr": "10.40.0.0/30", "reserved": 100})
    assert all(a <= n("10.40.0.3") for a in space.reserved)


def test_dns_must_be_an_address_ntp_may_be_a_name():
    assert site_addresses({"ntp": ["pool.ntp.org"], "dns": ["10.0.0.2"]}) == [
        ("dns", n("10.0.0.2"))
    ]
    with pytest.raises(AddressError):
        site_addresses({"dns": ["ns1.example.com"]})


@pytest.mark.parametrize(
    ("cidr", "first", "last", "usable"),
    [
        ("10.0.0.0/30", "10.0.0.1", "10.0.0.2", 2),
        ("10.0.0.8/31", "10.0.0.8", "10.0.0.9", 2),  # RFC 3021 point-to-point
        ("10.0.0.8/32", "10.0.0.8", "10.0.0.8", 1),
        ("10.0.0.0/29", "10.0.0.1", "10.0.0.6", 6),
        ("10.0.0.0/8", "10.0.0.1", "10.255.255.254", 2**24 - 2),
    ],
)
def test_small_and_large_networks(cidr, first, last, usable):
    space = network_space("x", {"cidr": cidr})
    assert (to_text(space.first_host), to_text(space.last_host), space.usable) == (
        first,
        last,
        usable,
    )


def test_unreadable_spec_raises_address_error():
    for spec in (
        {"cidr": "10.0.0.0/24", "reserved": ["junk"]},
        {"cidr": "10.0.0.0/24", "gateway": "10.0.0.300"},
        {"cidr": "10.0.0.0/24", "reserved": ["0.0.0.0-255.255.255.255"]},
    ):
        with pytest.raises(AddressError):
            network_space("x", spec)


@settings(max_examples=150, deadline=None)
@given(
    ranges=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 20)), max_size=8),
    window=st.tuples(st.integers(-5, 240), st.integers(-5, 240)),
)
def test_address_ranges_behave_like_the_set_of_their_addresses(ranges, window):
    pairs = [(low, low + size) for low, size in ranges]
    held = AddressRanges(pairs)
    expected = {a for low, high in pairs for a in range(low, high + 1)}
    assert len(held) == len(expected)
    assert set(held) == expected
    assert bool(held) is bool(expected)
    for address in range(-2, 240):
        assert (address in held) is (address in expected)
        if address in expected:
            end = held.end_of(address)
            assert set(range(address, end + 1)) <= expected
            assert end + 1 not in expected
    low, high = sorted(window)
    assert held.count_within(low, high) == len({a for a in expected if low <= a <= high})
