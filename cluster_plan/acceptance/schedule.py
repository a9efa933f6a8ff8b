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


class _Round:
    """One round being filled: who is busy and what each uplink carries (incremental)."""

    def __init__(self, fabric: Fabric) -> None:
        self.pairs: list[Pair] = []
        self.busy: set[str] = set()
        self.load: dict[str, float] = defaultdict(float)
        self.users: dict[str, int] = defaultdict(int)
        self._capacity = fabric.uplink_gbps

    def blocking(self, uplinks: Sequence[str], demand: float) -> str | None:
        """The first uplink that cannot take `demand` more, or None when the pair fits."""
        for switch in uplinks:
            capacity = self._capacity.get(switch)
            if (
                capacity is not None
                and self.users[switch]
                and (self.load[switch] + demand > capacity + 1e-9)
            ):
                return switch
        return None

    def add(self, pair: Pair, uplinks: Sequence[str], demand: float) -> None:
        self.pairs.append(pair)
        self.busy.update(pair)
        for switch in uplinks:
            self.load[switch] += demand
            self.users[switch] += 1


def schedule_rounds(nodes: Sequence[Node], fabric: Fabric, window: int = 16) -> list[list[Pair]]:
    by_name = {node.name: node for node in nodes}

    def route(pair: Pair) -> tuple[list[str], float]:
        a, b = by_name[pair[0]], by_name[pair[1]]
        return crossed_uplinks(a, b), min(a.link_gbps, b.link_gbps)

    rounds: list[_Round] = []
    leftover: list[Pair] = []
    for circle in circle_rounds([node.name for node in nodes]):
        # same-switch pairs first: they cost no uplink, so the round keeps the most pairs
        current = _Round(fabric)
        for pair in sorted(circle, key=lambda p: len(route(p)[0])):
            uplinks, demand = route(pair)
            if current.blocking(uplinks, demand) is None:
                current.add(pair, uplinks, demand)
            else:
                leftover.append(pair)
        rounds.append(current)
    # First fit of the leftovers into extra rounds, among the last `window` of them: older
    # rounds are nearly full, and scanning all of them makes large plans quadratic.
    extra: list[_Round] = []
    for pair in leftover:
        uplinks, demand = route(pair)
        for candidate in extra[-window:]:
            if pair[0] in candidate.busy or pair[1] in candidate.busy:
                continue
            if candidate.blocking(uplinks, demand) is None:
                candidate.add(pair, uplinks, demand)
                break
        else:
            fresh = _Round(fabric)
            fresh.add(pair, uplinks, demand)
            extra.append(fresh)
    return [r.pairs for r in rounds + extra if r.pairs]
