"""Which local process is on the other end of a loopback TCP connection.

Linux only and best effort: the connection's two ends give the client socket's inode,
asked of the kernel by its 4-tuple over sock_diag netlink (``/proc/net/tcp``, which lists
every TCP socket on the machine, where that is refused); the process holding that inode
is found among the few that made the last requests, then this provider's siblings (the
harness starts the workers too), then by scanning ``/proc/*/fd``. Any failure answers
None rather than slowing or failing the request.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any


def peer_pid(peer: tuple[str, int] | Any, local: tuple[str, int] | Any) -> int | None:
    try:
        inode = _diag_inode(peer, local)
        if inode is None:
            inode = _socket_inode(peer, local)
        return None if inode is None else _owner(inode)
    except (OSError, ValueError, IndexError):
        return None


#: sock_diag netlink (``linux/sock_diag.h``, ``linux/inet_diag.h``).
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NLMSG_HDR = struct.Struct("=IHHII")
#: ``inet_diag_req_v2``: family, protocol, extensions, pad, states; then the socket id.
_DIAG_REQ = struct.Struct("=BBBBI")
#: ``inet_diag_sockid``: ports and addresses in network order, interface, cookie.
_SOCKID = struct.Struct(">HH16s16s")
_SOCKID_TAIL = struct.Struct("=III")
_NO_COOKIE = 0xFFFFFFFF
#: Where ``idiag_inode`` sits in an ``inet_diag_msg``.
_INODE_AT = 68


def _diag_inode(peer: tuple[str, int], local: tuple[str, int]) -> str | None:
    """The client socket's inode from the kernel's socket table, looked up by its
    4-tuple: one request, where reading ``/proc/net/tcp`` costs milliseconds on a machine
    with thousands of sockets (a busy host's TIME_WAITs). None when it cannot answer."""
    # The client's socket has the client's address as *its* source.
    sockid = _SOCKID.pack(
        peer[1],
        local[1],
        socket.inet_aton(peer[0]).ljust(16, b"\0"),
        socket.inet_aton(local[0]).ljust(16, b"\0"),
    ) + _SOCKID_TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
    body = _DIAG_REQ.pack(socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    header = _NLMSG_HDR.pack(
        _NLMSG_HDR.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0
    )
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(1.0)
        nl.send(header + body)
        reply = nl.recv(8192)
    _, kind, _, _, _ = _NLMSG_HDR.unpack_from(reply)
    if kind == _NLMSG_ERROR:
        return None  # not found, or no diag support here: the table says
    (inode,) = struct.unpack_from("=I", reply, _NLMSG_HDR.size + _INODE_AT)
    return str(inode)


def _hex_addr(addr: tuple[str, int]) -> str:
    packed = socket.inet_aton(addr[0])
    # /proc/net/tcp prints the IPv4 address as a little-endian 32-bit word.
    return f"{int.from_bytes(packed, 'little'):08X}:{addr[1]:04X}"


def _socket_inode(peer: tuple[str, int], local: tuple[str, int]) -> str | None:
    # The client's socket has the client's address as *its* local end.
    want_local, want_remote = _hex_addr(peer), _hex_addr(local)
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            cols = line.split()
            if cols[1] == want_local and cols[2] == want_remote:
                return cols[9]
    return None


#: Pids that owned earlier connections, most recent first: the same few workers make
#: almost every request, so checking them first avoids a scan of every process.
_recent: list[int] = []
_RECENT_MAX = 16


def _owner(inode: str) -> int | None:
    target = f"socket:[{inode}]"
    for pid in [*_recent, *_siblings()]:
        if _holds(pid, target):
            _remember(pid)
            return pid
    me = os.getpid()
    uid = os.getuid()
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                if entry.stat().st_uid != uid:
                    continue
            except OSError:
                continue
            pid = int(entry.name)
            if _holds(pid, target):
                _remember(pid)
                return pid
    return None


def _siblings() -> list[int]:
    """The other children of whoever started this provider: a harness starts its workers
    as well, so a new worker is found here without a scan of every process."""
    parent, me = os.getppid(), os.getpid()
    pids: list[int] = []
    try:
        with os.scandir(f"/proc/{parent}/task") as tasks:
            for task in tasks:
                try:
                    with open(f"{task.path}/children") as f:
                        pids += (int(p) for p in f.read().split() if int(p) != me)
                except OSError:
                    continue
    except OSError:
        return []
    return pids


def _holds(pid: int, target: str) -> bool:
    fd_dir = f"/proc/{pid}/fd"
    try:
        for fd in os.listdir(fd_dir):
            try:
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    return True
            except OSError:
                continue
    except OSError:
        return False
    return False


def _remember(pid: int) -> None:
    # Request threads race here; a lost update only costs one slower lookup.
    if pid in _recent:
        _recent.remove(pid)
    _recent.insert(0, pid)
    del _recent[_RECENT_MAX:]
