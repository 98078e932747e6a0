"""A lean HTTP/1.1 client for engine calls: keep-alive connections over asyncio streams, framed
by h11 (the HTTP/1.1 state machine uvicorn and httpcore use).

Why not httpx: every turn costs the proxy one engine call, and on the 2-core VM the budgets are
measured on, an httpx.AsyncClient call costs ~2.0 ms of CPU against ~0.7 ms for this client
(bench/proxy_overhead.py prints the proxy's CPU per call): httpx was most of the proxy's own
time. Engines need little: JSON bodies, Content-Length or chunked replies, keep-alive, TLS.

An `Upstream` belongs to one event loop (its streams do); `EnginePool` keeps one per loop.
"""

import asyncio
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

USER_AGENT = "harbor-workbench-capture"
READ_SIZE = 256 * 1024


@dataclass
class Reply:
    status: int
    reason: str
    body: bytes


class UpstreamError(Exception):
    """The engine could not be reached or answered garbage (`kind`: timeout | unreachable)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.http = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self.answered = False  # any reply byte seen: a failure after it is no stale connection

    @property
    def reusable(self) -> bool:
        return self.http.our_state is h11.DONE and self.http.their_state is h11.DONE

    def alive(self, now: float, keepalive_s: float) -> bool:
        return now - self.idle_since < keepalive_s and not self.reader.at_eof()

    async def exchange(self, request: h11.Request, body: bytes) -> Reply:
        if self.http.our_state is h11.DONE:
            self.http.start_next_cycle()
        self.answered = False
        data = self.http.send(request)
        if body:
            data += self.http.send(h11.Data(data=body))
        data += self.http.send(h11.EndOfMessage())
        self.writer.write(data)  # headers and body in one write: one syscall
        await self.writer.drain()
        status, reason, chunks = 0, "", []
        while True:
            event = self.http.next_event()
            if event is h11.NEED_DATA:
                data = await self.reader.read(READ_SIZE)
                self.answered = self.answered or bool(data)
                self.http.receive_data(data)  # b"" = the engine closed the connection
            elif isinstance(event, h11.Response):
                status, reason = event.status_code, event.reason.decode("latin-1")
            elif isinstance(event, h11.Data):
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return Reply(status, reason, b"".join(chunks))
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the engine closed the connection")

    def close(self) -> None:
        self.writer.close()


class Upstream:
    """Keep-alive connections to one engine from one event loop.

    url: the engine's base URL (its path, if any, prefixes every request path).
    headers: sent with every request (e.g. the engine's own `authorization`).
    keepalive_s: idle connections older than this are not reused: below the engine's own
        keep-alive timeout (uvicorn's, hence vLLM's, is 5 s) so a request never races it.
    """

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        *,
        ssl_context: ssl.SSLContext | None = None,
        keepalive_s: float = 2.0,
        max_idle: int = 256,
    ):
        parts = urlsplit(url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl_context = ssl_context
        self.keepalive_s, self.max_idle = keepalive_s, max_idle
        netloc = parts.netloc.rsplit("@", 1)[-1]
        self.headers = [("host", netloc), ("user-agent", USER_AGENT), *headers.items()]
        self._idle: list[_Connection] = []

    async def request(
        self, method: str, path: str, body: bytes | None, *, timeout_s: float, connect_s: float
    ) -> Reply:
        """One request; a reused connection the engine had closed is retried once."""
        headers = [*self.headers, ("accept", "application/json")]
        if body is not None:
            headers += [("content-type", "application/json"), ("content-length", str(len(body)))]
        request = h11.Request(method=method, target=self.prefix + path, headers=headers)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            connection, reused = self._take(), True
            try:
                async with asyncio.timeout_at(deadline):
                    if connection is None:
                        connection, reused = await self._connect(connect_s), False
                    reply = await connection.exchange(request, body or b"")
            except TimeoutError as exc:
                self._discard(connection)
                raise UpstreamError("timeout", f"no answer within {timeout_s:g} s") from exc
            except (OSError, h11.ProtocolError, asyncio.IncompleteReadError) as exc:
                self._discard(connection)
                if reused and connection is not None and not connection.answered:
                    continue  # stale keep-alive connection: a fresh one is opened
                raise UpstreamError("unreachable", f"{type(exc).__name__}: {exc}") from exc
            except BaseException:  # cancelled mid-exchange: the connection state is unknown
                self._discard(connection)
                raise
            self._release(connection)
            return reply

    def _take(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if connection.alive(now, self.keepalive_s):
                return connection
            connection.close()
        return None

    async def _connect(self, connect_s: float) -> _Connection:
        async with asyncio.timeout(connect_s):
            reader, writer = await asyncio.open_connection(
                self.host,
                self.port,
                ssl=self.ssl_context if self.tls else None,
                limit=READ_SIZE,
            )
        return _Connection(reader, writer)

    def _release(self, connection: _Connection) -> None:
        if connection.reusable and len(self._idle) < self.max_idle:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()

    @staticmethod
    def _discard(connection: _Connection | None) -> None:
        if connection is not None:
            connection.close()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        await asyncio.gather(*(c.writer.wait_closed() for c in idle), return_exceptions=True)
