"""The SMTP front of an ``smtp`` provider: an aiosmtpd listener beside its HTTP server.

One provider process, two ports: the HTTP server keeps the control and oracle APIs (the
harness arms faults and reads the ground truth there, as for every provider), and this
listener takes the worker's mail. A message accepted at ``DATA`` goes through the same
``ProviderApp.write`` as an HTTP write, so the store, the fault board, holds and
identities are the provider's own, not copies; only the answer differs: an SMTP reply
line, or, for a drop, a reset connection and no reply at all (after the commit for
``drop_after_commit``: the client cannot tell whether its message went out).

aiosmtpd runs the sessions on one asyncio loop in a thread of its own; a write may block
(holds, delays), so it runs on a thread of its own too, shielded from the session: a
client killed while its message is held does not cancel the write, whose release commits
or drops it exactly as asked. Connections are stamped with the provider's epoch as the
HTTP ones are (``fake_providers.epochs``): a wipe aborts every SMTP connection of before,
a message read on one is dropped before it reaches the store, and with
``new_port_on_wipe`` the listener moves to a new port too.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from fake_providers.app import MAX_BODY_BYTES
from fake_providers.epochs import Epochs
from fake_providers.messages import Reply, Request
from fake_providers.peers import peer_pid
from fake_providers.personas.smtp import METHOD, PATH, parse_message, request_headers

if TYPE_CHECKING:
    from fake_providers.app import ProviderApp
    from fake_providers.control import Fence

#: How long a wipe waits for messages of before it to be done (as the HTTP server).
WIPE_WAIT_S = 5.0
#: Writes in flight at once: each held or delayed message parks one thread.
MAX_WRITES = 64


class SmtpListener:
    """The SMTP port of one provider; :meth:`close` ends it."""

    name = "smtp"

    def __init__(
        self, app: ProviderApp, *, host: str, peer_pids: bool, new_port_on_wipe: bool
    ) -> None:
        self.app = app
        self.host = host
        self.peer_pids = peer_pids
        self.new_port_on_wipe = new_port_on_wipe
        self.epochs = Epochs()
        self._loop = asyncio.new_event_loop()
        self._writes = ThreadPoolExecutor(MAX_WRITES, thread_name_prefix="smtp-write")
        self._server: asyncio.AbstractServer | None = None
        self._port = 0
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="smtp-loop", daemon=True
        )
        self._thread.start()
        self._serve_on(self._bind())

    @property
    def url(self) -> str:
        return f"smtp://{self.host}:{self._port}"

    # -- the fence a wipe raises --------------------------------------------------------

    def begin(self) -> int:
        """A new epoch: every SMTP connection of before is aborted, and with
        ``new_port_on_wipe`` the listener moves to a fresh port first."""
        if self.new_port_on_wipe:
            self._serve_on(self._bind())
        stale = self.epochs.advance()
        for transport in stale:
            self._loop.call_soon_threadsafe(_reset, transport)
        return len(stale)

    def wait(self) -> bool:
        return self.epochs.wait_idle(WIPE_WAIT_S)

    def close(self) -> None:
        if not self._loop.is_closed():
            with contextlib.suppress(Exception):
                self._call(self._stop())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5.0)
            self._loop.close()
        self._writes.shutdown(wait=False, cancel_futures=True)

    # -- the loop's side ----------------------------------------------------------------

    def _bind(self) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((self.host, 0))
            s.listen(128)
            s.setblocking(False)
        except OSError:
            s.close()
            raise
        return s

    def _serve_on(self, sock: socket.socket) -> None:
        old = self._server
        self._server = self._call(self._loop.create_server(self._session, sock=sock))
        self._port = int(sock.getsockname()[1])
        if old is not None:
            old.close()  # no new connections on the old port; open ones a wipe aborts

    def _session(self) -> SMTP:
        return _Session(self, _Handler(self), loop=self._loop)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for transport in self.epochs.advance():
            _reset(transport)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10.0)

    # -- one message --------------------------------------------------------------------

    def write(self, session: _Session, envelope: Envelope) -> Reply:
        """Record, fault and commit one message (on a write thread): the app's write."""
        transport = session.transport
        if not self.epochs.enter(transport, session.epoch):
            return Reply(0, drop=True)  # accepted before a wipe: of a trial that is over
        try:
            content = bytes(envelope.original_content or b"")
            mail_from = str(envelope.mail_from or "")
            rcpt_tos = [str(r) for r in envelope.rcpt_tos]
            if self.peer_pids and not session.peer_known and transport is not None:
                local = transport.get_extra_info("sockname")
                session.peer_pid = peer_pid(transport.get_extra_info("peername"), local)
                session.peer_known = True
            req = Request(
                method=METHOD,
                target=PATH,
                headers=request_headers(content),
                body=content,
                peer_pid=session.peer_pid,
            )
            parsed = parse_message(content, mail_from=mail_from, rcpt_tos=rcpt_tos)
            return self.app.write(req, PATH, parsed)
        finally:
            self.epochs.leave()

    async def deliver(self, session: _Session, envelope: Envelope) -> str:
        """``DATA`` is in: the reply line, or (a drop) a reset connection and none."""
        work = self._loop.run_in_executor(self._writes, self.write, session, envelope)
        # Shielded: a client gone mid-hold cancels this session, never the write.
        reply = await asyncio.shield(work)
        if reply.drop:
            if session.transport is not None:
                _reset(session.transport)
            # connection_lost cancels the session's task here: no reply line is sent.
            await asyncio.Event().wait()
        return reply.body.decode("ascii", "replace")


class _Session(SMTP):
    """One SMTP connection, stamped with the epoch it was accepted in."""

    def __init__(self, listener: SmtpListener, handler: _Handler, **kw: Any) -> None:
        # A fixed hostname: socket.getfqdn() would ask the resolver on every connection.
        super().__init__(
            handler,
            hostname="crashpoint.localhost",
            ident="crashpoint fake SMTP provider",
            data_size_limit=MAX_BODY_BYTES,
            **kw,
        )
        self.listener = listener
        self.epoch = 0
        self.peer_pid: int | None = None
        self.peer_known = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.epoch = self.listener.epochs.opened(transport)
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        if self.transport is not None:
            self.listener.epochs.closed(self.transport)
        super().connection_lost(error)


class _Handler:
    def __init__(self, listener: SmtpListener) -> None:
        self.listener = listener

    async def handle_DATA(self, server: _Session, session: Session, envelope: Envelope) -> str:
        return await self.listener.deliver(server, envelope)


def _reset(transport: asyncio.BaseTransport) -> None:
    """Close with an RST, not a FIN: the client's message vanishes without an answer."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    abort = getattr(transport, "abort", None)
    if abort is not None:
        abort()
    else:
        transport.close()


class Fences:
    """The HTTP server's fence and the SMTP listener's, raised together by a wipe."""

    def __init__(self, *fences: Fence) -> None:
        self._fences = fences

    @property
    def url(self) -> str:
        return self._fences[0].url

    def begin(self) -> int:
        return sum(f.begin() for f in self._fences)

    def wait(self) -> bool:
        return all([f.wait() for f in self._fences])


def attach(app: ProviderApp, *, host: str, peer_pids: bool, new_port_on_wipe: bool) -> None:
    """Give ``app`` (whose server is built, its fence set) an SMTP listener."""
    listener = SmtpListener(app, host=host, peer_pids=peer_pids, new_port_on_wipe=new_port_on_wipe)
    app.control.fence = Fences(app.control.fence, listener)
    app.listeners.append(listener)
