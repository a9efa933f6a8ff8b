"""The delay stage: a user-space NFQUEUE reader that holds each packet for a fixed time.

This kernel has no netem, so `lab fault --delay` queues the node's bridged IPv4 frames
(iptables NFQUEUE in the fabric namespace, with --queue-bypass so that traffic flows
undelayed whenever this process is not running) and this process gives each packet its
accept verdict `delay` later. It speaks nfnetlink_queue directly over a netlink socket.

python -m cluster_plan.lab.delay QUEUE_NUM DELAY_MS NETNS [MAX_SECONDS]

NETNS is the (fabric) namespace it runs in: the stage ends when that namespace is gone.
"""

from __future__ import annotations

import heapq
import select
import signal
import socket
import struct
import sys
import time
from types import FrameType

from cluster_plan.lab.watchdog import netns_alive

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NLMSG_HDR = struct.Struct("=IHHII")


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(msg: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    kind = (NFNL_SUBSYS_QUEUE << 8) | msg
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), kind, flags, 0, 0) + body


def _check_ack(sock: socket.socket) -> None:
    data = sock.recv(65536)
    kind = NLMSG_HDR.unpack_from(data)[1]
    if kind == NLMSG_ERROR:
        (errno,) = struct.unpack_from("=i", data, NLMSG_HDR.size)
        if errno:
            raise OSError(-errno, "nfnetlink_queue refused the configuration")


def bind(queue: int) -> socket.socket:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((0, 0))
    cmd = _attr(NFQA_CFG_CMD, struct.pack("=BxH", NFQNL_CFG_CMD_BIND, 0))
    sock.send(_message(NFQNL_MSG_CONFIG, queue, cmd, NLM_F_REQUEST | NLM_F_ACK))
    _check_ack(sock)
    params = _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
    params += _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", 8192))
    sock.send(_message(NFQNL_MSG_CONFIG, queue, params, NLM_F_REQUEST | NLM_F_ACK))
    _check_ack(sock)
    return sock


def packet_ids(data: bytes) -> list[int]:
    """The packet ids in one netlink datagram of queued-packet messages."""
    ids = []
    offset = 0
    while offset + NLMSG_HDR.size <= len(data):
        length, kind = NLMSG_HDR.unpack_from(data, offset)[:2]
        if length < NLMSG_HDR.size:
            break
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            pos = offset + NLMSG_HDR.size + 4  # after nfgenmsg
            while pos + 4 <= offset + length:
                alen, atype = struct.unpack_from("=HH", data, pos)
                if alen < 4:
                    break
                if atype & 0x3FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from("!I", data, pos + 4)[0])
                pos += alen + (-alen % 4)
        offset += length + (-length % 4)
    return ids


def verdict(sock: socket.socket, queue: int, packet_id: int) -> None:
    attrs = _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))
    sock.send(_message(NFQNL_MSG_VERDICT, queue, attrs))


def run(queue: int, delay_s: float, netns: str, max_seconds: float) -> None:
    sock = bind(queue)
    held: list[tuple[float, int]] = []
    stopping = False

    def stop(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    end = time.monotonic() + max_seconds if max_seconds > 0 else float("inf")
    checked = time.monotonic()
    while not stopping and time.monotonic() < end:
        if time.monotonic() - checked > 1:
            checked = time.monotonic()
            if not netns_alive(netns, inside=True):
                break
        wait = min(0.5, held[0][0] - time.monotonic()) if held else 0.5
        try:
            ready, _, _ = select.select([sock], [], [], max(0.0, wait))
        except InterruptedError:
            continue
        if ready:
            try:
                data = sock.recv(1 << 16)
            except OSError:  # ENOBUFS: the kernel dropped some; keep serving
                continue
            due = time.monotonic() + delay_s
            for packet_id in packet_ids(data):
                heapq.heappush(held, (due, packet_id))
        now = time.monotonic()
        while held and held[0][0] <= now:
            verdict(sock, queue, heapq.heappop(held)[1])
    for _due, packet_id in held:  # release what is held rather than drop it
        verdict(sock, queue, packet_id)
    sock.close()


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    run(int(argv[0]), float(argv[1]) / 1000, argv[2], float(argv[3]) if len(argv) == 4 else 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
