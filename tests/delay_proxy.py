"""A TCP proxy on loopback that delays what the server sends once the client has asked to play.

A network path slower for one of a camera's two streams than the other: RTSP over TCP
(interleaved RTP and RTCP) through it arrives ``delay_s`` late, its setup exchange does not
(so opening the stream takes no longer).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator


class DelayProxy:
    """Listens on 127.0.0.1 (``port``) and forwards each connection to ``target_port``; bytes
    from the server are held ``delay_s`` once the client has sent an RTSP ``PLAY``."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self.delay_s = delay_s
        self._target = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def url(self, server_url: str) -> str:
        """``server_url`` (rtsp://127.0.0.1:PORT/...) through this proxy."""
        return server_url.replace(f":{self._target}/", f":{self.port}/", 1)

    def start(self) -> DelayProxy:
        self._spawn(self._accept)
        return self

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for t in self._threads:
            t.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            playing = threading.Event()
            self._spawn(self._upstream, client, server, playing)
            self._spawn(self._downstream, server, client, playing)

    def _upstream(
        self, client: socket.socket, server: socket.socket, playing: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if b"PLAY " in data:
                    playing.set()
                server.sendall(data)
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_WR)

    def _downstream(
        self, server: socket.socket, client: socket.socket, playing: threading.Event
    ) -> None:
        """Received bytes go out ``delay_s`` after they came, in order (due times only grow)."""
        held: deque[tuple[float, bytes]] = deque()
        server.settimeout(0.01)
        with contextlib.suppress(OSError):
            while not self._stop.is_set():
                try:
                    data = server.recv(65536)
                    if not data:
                        break
                    due = time.monotonic() + (self.delay_s if playing.is_set() else 0.0)
                    held.append((due, data))
                except TimeoutError:
                    pass
                while held and held[0][0] <= time.monotonic():
                    client.sendall(held.popleft()[1])
        with contextlib.suppress(OSError):
            client.close()


@contextlib.contextmanager
def delayed(target_port: int, delay_s: float) -> Iterator[DelayProxy]:
    proxy = DelayProxy(target_port, delay_s).start()
    try:
        yield proxy
    finally:
        proxy.stop()
