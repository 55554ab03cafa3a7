"""TCP between workers: one connection per (peer, stream), pieces sent from and received into tensor memory."""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Callable, Dict, Iterable, Optional, Tuple

HANDSHAKE = struct.Struct("!II")  # src rank, stream
HEADER = struct.Struct("!IIIQ")  # step, piece, stream, payload bytes
SOCKET_BUFFER = 4 << 20


class TransportError(RuntimeError):
    """A peer vanished or did not answer in time; the message names the peer and the step."""


Address = Tuple[str, int]


def send_all(sock: socket.socket, view: memoryview) -> None:
    """Send every byte; the socket's timeout bounds each wait for buffer space (inactivity), not the whole
    transfer, unlike socket.sendall since Python 3.5 -- a slow healthy link must not time out."""
    view = view.cast("B") if view.format != "B" else view
    sent = 0
    while sent < view.nbytes:
        sent += sock.send(view[sent:])


def _tune(sock: socket.socket, timeout: float, buffer: int) -> None:
    """No Nagle, the buffers, the timeout (the congestion control is set before connecting)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    sock.settimeout(timeout)


class Transport:
    """Connections of one rank: outgoing to the peers it sends to, incoming from the peers it hears from."""

    def __init__(self, rank: int, listen: Address, timeout: float = 60.0,
                 names: Optional[Callable[[int], str]] = None, buffer: int = SOCKET_BUFFER,
                 congestion: Optional[str] = None):
        self.rank = rank
        self.timeout = timeout
        self.buffer = buffer
        self.congestion = congestion
        self.name = names or (lambda r: f"rank {r}")
        self.server = socket.create_server(listen, reuse_port=False, backlog=256)
        self._set_congestion(self.server)  # accepted sockets inherit it
        self.server.settimeout(timeout)
        self.out: Dict[Tuple[int, int], socket.socket] = {}
        self.inc: Dict[Tuple[int, int], socket.socket] = {}
        self.ports: Dict[Tuple[str, int, int], Tuple[int, int]] = {}  # (dir, peer, stream) -> data's TCP ports

    def connect(self, outgoing: Iterable[Tuple[int, int, Address]], incoming: Iterable[Tuple[int, int]]) -> None:
        """Open every (peer, stream) connection we send on and accept every one we receive on."""
        expected = set(incoming)
        errors = []
        acceptor = threading.Thread(target=self._accept, args=(expected, errors), daemon=True)
        acceptor.start()
        for peer, stream, address in outgoing:
            sock = self.out[(peer, stream)] = self._dial(peer, stream, address)
            self.ports[("send", peer, stream)] = (sock.getsockname()[1], sock.getpeername()[1])
        acceptor.join()
        if errors:
            raise errors[0]
        for (peer, stream), sock in self.inc.items():
            self.ports[("recv", peer, stream)] = (sock.getpeername()[1], sock.getsockname()[1])

    def _dial(self, peer: int, stream: int, address: Address) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._set_congestion(sock)
                sock.settimeout(5)
                sock.connect(address)
                break
            except OSError as exc:
                sock.close()
                if time.monotonic() > deadline:
                    raise TransportError(f"cannot connect to {self.name(peer)} at {address[0]}:{address[1]}: "
                                         f"{exc}") from None
                time.sleep(0.1)
        _tune(sock, self.timeout, self.buffer)
        sock.sendall(HANDSHAKE.pack(self.rank, stream))
        return sock

    def _set_congestion(self, sock: socket.socket) -> None:
        """The emulated network's congestion control on this socket (TCP_CONGESTION)."""
        if self.congestion:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.congestion.encode())
            except OSError as exc:
                raise TransportError(f"cannot use TCP congestion control {self.congestion}: {exc}") from None

    def _accept(self, expected, errors) -> None:
        try:
            while expected - set(self.inc):
                try:
                    sock, _ = self.server.accept()
                except socket.timeout:
                    missing = ", ".join(self.name(p) for p, _ in sorted(expected - set(self.inc)))
                    raise TransportError(f"{missing} did not connect within {self.timeout:.0f}s") from None
                _tune(sock, self.timeout, self.buffer)
                src, stream = HANDSHAKE.unpack(self._read_exact(sock, HANDSHAKE.size, None, "handshake"))
                self.inc[(src, stream)] = sock
        except Exception as exc:
            errors.append(exc)

    def send(self, peer: int, stream: int, step: int, piece: int, payload) -> None:
        """Send one piece (header then the tensor's own bytes, no copy; or encoded bytes)."""
        sock = self.out[(peer, stream)]
        payload = memoryview(payload)
        try:
            send_all(sock, memoryview(HEADER.pack(step, piece, stream, payload.nbytes)))
            send_all(sock, payload)
        except socket.timeout:
            raise TransportError(f"sending piece {piece} to {self.name(peer)}: no byte moved for "
                                 f"{self.timeout:.0f}s in step {step} of stream {stream}") from None
        except OSError as exc:
            raise TransportError(f"{self.name(peer)} vanished while we sent piece {piece} in step {step} "
                                 f"of stream {stream}: {exc}") from None

    def recv_into(self, peer: int, stream: int, step: int, piece: int, target: memoryview) -> None:
        """Receive one piece straight into target, checking it is the piece and step we expect."""
        sock = self.inc[(peer, stream)]
        where = f"step {step} of stream {stream}"
        got_step, got_piece, got_stream, nbytes = HEADER.unpack(self._read_exact(sock, HEADER.size, peer, where))
        if (got_step, got_piece, got_stream, nbytes) != (step, piece, stream, target.nbytes):
            raise TransportError(f"{self.name(peer)} sent step {got_step} piece {got_piece} ({nbytes} B) but "
                                 f"{where} expects piece {piece} ({target.nbytes} B)")
        self._read_into(sock, target, peer, where)

    def recv_message(self, peer: int, stream: int, step: int, piece: int, max_bytes: int) -> bytearray:
        """Receive one variable-size (encoded) piece, checking piece and step."""
        sock = self.inc[(peer, stream)]
        where = f"step {step} of stream {stream}"
        got_step, got_piece, got_stream, nbytes = HEADER.unpack(self._read_exact(sock, HEADER.size, peer, where))
        if (got_step, got_piece, got_stream) != (step, piece, stream) or nbytes > max_bytes:
            raise TransportError(f"{self.name(peer)} sent step {got_step} piece {got_piece} ({nbytes} B) but "
                                 f"{where} expects piece {piece} (at most {max_bytes} B)")
        buf = bytearray(nbytes)
        self._read_into(sock, memoryview(buf), peer, where)
        return buf

    def _read_exact(self, sock, n: int, peer, where: str) -> bytes:
        buf = bytearray(n)
        self._read_into(sock, memoryview(buf), peer, where)
        return bytes(buf)

    def _read_into(self, sock, view: memoryview, peer, where: str) -> None:
        view = view.cast("B") if view.format != "B" else view
        got = 0
        while got < view.nbytes:
            try:
                n = sock.recv_into(view[got:])
            except socket.timeout:
                raise TransportError(f"{self.name(peer) if peer is not None else 'a peer'} sent nothing for "
                                     f"{self.timeout:.0f}s in {where}") from None
            except OSError as exc:
                raise TransportError(f"{self.name(peer)} vanished in {where}: {exc}") from None
            if n == 0:
                raise TransportError(f"{self.name(peer) if peer is not None else 'a peer'} closed the "
                                     f"connection in {where}")
            got += n

    def close(self) -> None:
        """Close every socket."""
        for sock in list(self.out.values()) + list(self.inc.values()) + [self.server]:
            try:
                sock.close()
            except OSError:
                pass
