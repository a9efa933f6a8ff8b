"""The site services the plan points at on its first network (e.g. dns/ntp 10.40.0.2),
served from the admin namespace, for sites whose roles do not provide them:

- DNS (UDP 53): A records for every plan host (short name and FQDN, its mgmt address);
  NXDOMAIN for other names in the cluster domain, REFUSED for the rest (no upstream:
  the lab has no way out, by design);
- NTP (UDP 123): server replies from this machine's clock, which the nodes share anyway.

python -m cluster_plan.lab.sitesvc ZONE_JSON ADMIN_NS ADDRESS...  (ends with ADMIN_NS)
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import time
from pathlib import Path
from typing import Any, cast

from cluster_plan.lab.watchdog import exit_when_gone
from cluster_plan.plan.contract import ExpandedPlan

NTP_EPOCH_OFFSET = 2208988800


def dns_reply(query: bytes, zone: dict[str, str], domain: str) -> bytes | None:
    """The answer to one DNS query packet, or None when it is not a query."""
    if len(query) < 12:
        return None
    ident, flags, qdcount = struct.unpack_from("!HHH", query)
    if flags & 0x8000 or qdcount != 1:
        return None
    labels, pos = [], 12
    while pos < len(query) and query[pos]:
        length = query[pos]
        labels.append(query[pos + 1 : pos + 1 + length].decode("ascii", "replace").lower())
        pos += 1 + length
    if pos + 5 > len(query):
        return None
    qtype, _qclass = struct.unpack_from("!HH", query, pos + 1)
    question = query[12 : pos + 5]
    name = ".".join(labels)
    answers = b""
    address = zone.get(name)
    if address is not None:
        rcode = 0
        if qtype in (1, 255):  # A or ANY
            answers = (
                b"\xc0\x0c"
                + struct.pack("!HHIH", 1, 1, 60, 4)
                + bytes(int(part) for part in address.split("."))
            )
    elif name == domain or name.endswith(f".{domain}"):
        rcode = 3  # NXDOMAIN: ours, and not there
    else:
        rcode = 5  # REFUSED: the lab resolves its own names only
    header = struct.pack(
        "!HHHHHH", ident, 0x8400 | (flags & 0x0100) | rcode, 1, 1 if answers else 0, 0, 0
    )
    return header + question + answers


def _ntp_time(unix: float) -> bytes:
    seconds = int(unix) + NTP_EPOCH_OFFSET
    return struct.pack("!II", seconds & 0xFFFFFFFF, int((unix % 1) * 2**32) & 0xFFFFFFFF)


def ntp_reply(request: bytes, received: float) -> bytes | None:
    if len(request) < 48 or request[0] & 0x07 != 3:  # client mode only
        return None
    version = (request[0] >> 3) & 0x07
    now = time.time()
    return (
        bytes([(version << 3) | 4, 1, request[2], 0xEC])  # server, stratum 1, ~1us
        + struct.pack("!II", 0, 0x10)
        + b"LAB\0"
        + _ntp_time(now)
        + request[40:48]
        + _ntp_time(received)
        + _ntp_time(now)
    )


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        reply = self.answer(data)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)


async def serve(zone_file: str, admin_ns: str, addresses: list[str]) -> None:
    spec = json.loads(Path(zone_file).read_text())
    zone, domain = spec["zone"], spec["domain"]
    loop = asyncio.get_running_loop()
    for address in addresses:
        await loop.create_datagram_endpoint(
            lambda: _Udp(lambda data: dns_reply(data, zone, domain)), local_addr=(address, 53)
        )
        await loop.create_datagram_endpoint(
            lambda: _Udp(lambda data: ntp_reply(data, time.time())), local_addr=(address, 123)
        )
    await exit_when_gone(admin_ns, inside=True)


def zone_of(expanded: ExpandedPlan) -> dict[str, Any]:
    domain = expanded["cluster"]["domain"].lower()
    zone: dict[str, str] = {}
    for host, spec in expanded["hosts"].items():
        zone[host.lower()] = spec["address"]
        zone[spec["fqdn"].lower()] = spec["address"]
    return {"domain": domain, "zone": zone}


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    asyncio.run(serve(argv[0], argv[1], argv[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
