"""Which pairs run together: rounds of disjoint pairs that never oversubscribe an uplink.

The circle method gives N-1 rounds (N for odd N) in which every node is in exactly one pair,
so every pair is tested once and each NIC carries one test at a time. A round whose
cross-switch pairs would need more than an uplink carries is split; the pairs left over are
packed first-fit into extra rounds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from cluster_plan.acceptance.spec import Fabric, Node

Pair = tuple[str, str]


def circle_rounds(names: Sequence[str]) -> list[list[Pair]]:
    """Round-robin tournament (circle method): every unordered pair exactly once."""
    players: list[str | None] = list(names)
    if len(players) < 2:
        return []
    if len(players) % 2:
        players.append(None)  # the node paired with None sits the round out
    count = len(players)
    rounds = []
    for _ in range(count - 1):
        pairs = [
            (a, b)
            for a, b in ((players[i], players[count - 1 - i]) for i in range(count // 2))
            if a is not None and b is not None
        ]
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def uplink_load(pairs: Iterable[Pair], nodes: dict[str, Node]) -> dict[str, float]:
    """Plan Gb/s each switch's uplink carries (each way) when these pairs run at line rate."""
    load: dict[str, float] = defaultdict(float)
    for a, b in pairs:
        node_a, node_b = nodes[a], nodes[b]
        demand = min(node_a.link_gbps, node_b.link_gbps)
        for switch in crossed_uplinks(node_a, node_b):
            load[switch] += demand
    return load


def crossed_uplinks(a: Node, b: Node) -> list[str]:
    if a.access_switch == b.access_switch:
        return []
    crossed = [a.access_switch, b.access_switch]
    if a.aggregation_switch != b.aggregation_switch:
        crossed += [s for s in (a.aggregation_switch, b.aggregation_switch) if s]
    return crossed


def fits(pairs: Sequence[Pair], nodes: dict[str, Node], fabric: Fabric) -> bool:
    """Within every uplink's capacity; a single pair faster than an uplink may still run alone."""
    load = uplink_load(pairs, nodes)
    users: dict[str, int] = defaultdict(int)
    for a, b in pairs:
        for switch in crossed_uplinks(nodes[a], nodes[b]):
            users[switch] += 1
    return all(
        switch not in fabric.uplink_gbps
        or users[switch] <= 1
        or gbps <= fabric.uplink_gbps[switch] + 1e-9
        for switch, gbps in load.items()
    )


def schedule_rounds(nodes: Sequence[Node], fabric: Fabric) -> list[list[Pair]]:
    by_name = {node.name: node for node in nodes}
    rounds: list[list[Pair]] = []
    leftover: list[Pair] = []
    for circle in circle_rounds([node.name for node in nodes]):
        # same-switch pairs first: they cost no uplink, so the round keeps the most pairs
        ordered = sorted(circle, key=lambda p: len(crossed_uplinks(by_name[p[0]], by_name[p[1]])))
        kept: list[Pair] = []
        for pair in ordered:
            if fits([*kept, pair], by_name, fabric):
                kept.append(pair)
            else:
                leftover.append(pair)
        rounds.append(kept)
    extra: list[list[Pair]] = []
    for pair in leftover:
        for round_ in extra:
            busy = {n for p in round_ for n in p}
            if (
                pair[0] not in busy
                and pair[1] not in busy
                and fits([*round_, pair], by_name, fabric)
            ):
                round_.append(pair)
                break
        else:
            extra.append([pair])
    return [r for r in rounds + extra if r]
