"""The lean engine client against a raw HTTP/1.1 server on a real socket: framing, keep-alive,
stale connections, timeouts, and which credentials go upstream."""

import asyncio
import json

import pytest

from capture.engines import EngineError, EnginePool, EngineRef
from capture.upstream import Upstream, UpstreamError


class RawServer:
    """Answers each request with `respond(head, nth) -> bytes | None` (nth: the request's rank
    on its connection; None hangs up) and records what it got."""

    def __init__(self, respond):
        self.respond = respond
        self.requests: list[tuple[bytes, bytes]] = []
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self):
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        for writer in self.writers:
            writer.close()

    async def handle(self, reader, writer):
        self.connections += 1
        self.writers.append(writer)
        try:
            for nth in range(1_000_000):
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                body = await reader.readexactly(length)
                self.requests.append((head, body))
                answer = await self.respond(head, nth)
                if answer is None:  # hang up without answering
                    break
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def json_answer(obj, extra=b""):
    body = json.dumps(obj).encode()
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s"
        % (
            len(body),
            extra,
            body,
        )
    )


async def call(upstream, path="/v1/x", body=b"{}", timeout_s=5.0):
    return await upstream.request("POST", path, body, timeout_s=timeout_s, connect_s=5.0)


async def test_keep_alive_reuses_one_connection():
    async def respond(head, nth):
        return json_answer({"ok": True})

    async with RawServer(respond) as server:
        upstream = Upstream(server.url, {})
        for _ in range(3):
            reply = await call(upstream)
            assert (reply.status, json.loads(reply.body)) == (200, {"ok": True})
        await upstream.aclose()
    assert server.connections == 1


async def test_chunked_reply_and_connection_close_are_handled():
    async def respond(head, nth):
        return (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            b'4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
        )

    async with RawServer(respond) as server:
        upstream = Upstream(server.url, {})
        assert json.loads((await call(upstream)).body) == {"a": 1}
        assert json.loads((await call(upstream)).body) == {"a": 1}  # a new connection
        await upstream.aclose()
    assert server.connections == 2


async def test_a_stale_keep_alive_connection_is_retried_on_a_fresh_one():
    async def respond(head, nth):
        # The engine drops a kept-alive connection on its second request, unanswered (as when
        # its keep-alive timer fires at the moment the request arrives).
        return json_answer({"nth": nth}) if nth == 0 else None

    async with RawServer(respond) as server:
        upstream = Upstream(server.url, {})
        assert json.loads((await call(upstream)).body) == {"nth": 0}
        assert json.loads((await call(upstream)).body) == {"nth": 0}  # retried, fresh connection
        await upstream.aclose()
    assert server.connections == 2 and len(server.requests) == 3


async def test_an_engine_that_does_not_answer_times_out():
    async def respond(head, nth):
        await asyncio.sleep(5)
        return json_answer({})

    async with RawServer(respond) as server:
        upstream = Upstream(server.url, {})
        with pytest.raises(UpstreamError) as caught:
            await call(upstream, timeout_s=0.2)
        assert caught.value.kind == "timeout"


async def test_refused_connection_is_unreachable():
    with pytest.raises(UpstreamError) as caught:
        await call(Upstream("http://127.0.0.1:9", {}))
    assert caught.value.kind == "unreachable"


async def test_engine_key_goes_upstream_and_url_path_prefixes_requests():
    async def respond(head, nth):
        return json_answer({"object": "list", "data": []})

    async with RawServer(respond) as server:
        pool = EnginePool()
        ref = EngineRef(url=server.url + "/engine/v1", api_key="engine-key")
        await pool.request(ref, "GET", "/v1/models")
        await pool.aclose()
    head = server.requests[0][0].decode().lower()
    assert head.startswith("get /engine/v1/models ")
    assert "authorization: bearer engine-key" in head


async def test_engine_4xx_keeps_its_status_and_5xx_becomes_502():
    async def respond(head, nth):
        status = b"400 Bad Request" if b"/bad" in head else b"503 Service Unavailable"
        payload = b'{"error": {"message": "nope"}}'
        return b"HTTP/1.1 %s\r\ncontent-length: %d\r\n\r\n%s" % (status, len(payload), payload)

    async with RawServer(respond) as server:
        pool = EnginePool()
        ref = EngineRef(url=server.url)
        with pytest.raises(EngineError) as bad:
            await pool.request(ref, "POST", "/bad", {})
        with pytest.raises(EngineError) as down:
            await pool.request(ref, "POST", "/down", {})
        await pool.aclose()
    assert (bad.value.status, bad.value.message) == (400, "nope")
    assert down.value.status == 502 and "503" in down.value.message
