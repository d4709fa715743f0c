"""A provider names the process on the other end of a loopback connection.

The kernel's socket table is asked by the connection's 4-tuple (sock_diag); it must
give the inode ``/proc/net/tcp`` gives, and the owner found must be the client.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator

import pytest

from fake_providers import peers

pytestmark = pytest.mark.process

# Connects to the port in argv[1], says its own end, and waits for stdin to close.
CLIENT = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
host, port = c.getsockname()
print(port, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        yield srv


def test_the_kernel_table_gives_the_inode_proc_net_tcp_gives(listener: socket.socket) -> None:
    with socket.create_connection(listener.getsockname()) as client:
        conn, peer = listener.accept()
        with conn:
            local = conn.getsockname()
            inode = str(os.fstat(client.fileno()).st_ino)
            assert peers._diag_inode(peer, local) == inode
            assert peers._socket_inode(peer, local) == inode


def test_the_lookup_is_by_direction_and_a_gone_client_has_none(listener: socket.socket) -> None:
    client = socket.create_connection(listener.getsockname())
    conn, peer = listener.accept()
    with conn:
        local = conn.getsockname()
        # Seen from the server's end, the same two addresses name the server's socket.
        assert peers._diag_inode(local, peer) == str(os.fstat(conn.fileno()).st_ino)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # an RST: no TIME_WAIT entry is left behind
        assert peers._diag_inode(peer, local) is None


def test_the_owner_is_the_client_process(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    with subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        conn, peer = listener.accept()
        with conn:
            assert int(child.stdout.readline()) == peer[1]
            assert peers.peer_pid(peer, conn.getsockname()) == child.pid
        child.stdin.close()
