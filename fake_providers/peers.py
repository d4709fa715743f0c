"""Which local process is on the other end of a loopback TCP connection.

Linux only and best effort: the client's port gives a socket inode in
``/proc/net/tcp``; the process holding that inode is found by scanning ``/proc/*/fd``.
Any failure answers None rather than slowing or failing the request.
"""

from __future__ import annotations

import os
import socket
from typing import Any


def peer_pid(peer: tuple[str, int] | Any, local: tuple[str, int] | Any) -> int | None:
    try:
        inode = _socket_inode(peer, local)
        return None if inode is None else _owner(inode)
    except (OSError, ValueError, IndexError):
        return None


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
    for pid in list(_recent):
        if _holds(pid, target):
            _remember(pid)
            return pid
    me = os.getpid()
    uid = os.getuid()
    for entry in os.scandir("/proc"):
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
