"""Serve an ASGI app with uvicorn on a daemon thread (tests, benchmarks, embedding).

The one way this project runs a server in-process: the capture proxy (`CaptureServer`), the
reference engine (`workbench.engine.runner.EngineServer`), the workbench's own proxy
(`WorkbenchService.serve_proxy`) and the test app all use `ThreadedServer`.
"""

import socket
import threading
import time
from typing import Any, Literal, Self

import uvicorn


def tcp_socket(host: str, port: int) -> socket.socket:
    """An IPv4 TCP socket bound to (host, port); port 0 picks a free one."""
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on sockets whose proto says
    # TCP, and without it every keep-alive answer (headers and body written apart) waits ~40 ms
    # for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class ThreadedServer:
    """`app` served by uvicorn on a daemon thread, on a socket bound before the thread starts.

    with ThreadedServer(create_capture_app(settings)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=session_id)

    app: the ASGI app; may be assigned later, before `start()` (e.g. an app that must know its
        own port: `port = server.bind()`, build the app, `server.app = app`).
    host, port: where to listen; port 0 picks a free port (`port` holds the bound one).
    lifespan: uvicorn's lifespan mode ("on" runs the app's startup/shutdown).
    name: the thread's name, and what a start failure calls the server.

    `url` (no `/v1`) is known once bound. `start()` returns once uvicorn accepts connections;
    `stop()` shuts it down and joins the thread. Both are idempotent.

    Starting never touches logging: uvicorn's default `log_config` re-runs `dictConfig` on its
    shared loggers, and `log_level` / `access_log=False` set their levels and handlers for the
    whole process, so an embedded server would silence the host app's own uvicorn logs.
    """

    def __init__(
        self,
        app: Any = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        lifespan: Literal["on", "off", "auto"] = "on",
        name: str = "server",
    ) -> None:
        self.app, self.host, self.name, self.lifespan = app, host, name, lifespan
        self._requested_port = port
        self.port: int | None = None
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError(f"the {self.name} is not started; call start() or use `with`")
        return f"http://{self.host}:{self.port}"

    @property
    def listener(self) -> socket.socket | None:
        """The listening socket while bound."""
        return self._socket

    def bind(self) -> int:
        """Bind the listening socket now (idempotent); returns the port."""
        if self._socket is None:
            self._socket = tcp_socket(self.host, self._requested_port)
            self.port = self._socket.getsockname()[1]
        return self.port or 0

    def start(self, timeout_s: float = 30.0) -> Self:
        if self._thread is not None:
            return self
        if self.app is None:
            raise RuntimeError(f"the {self.name} has no app to serve")
        self.bind()
        config = uvicorn.Config(
            self.app, lifespan=self.lifespan, log_config=None, timeout_graceful_shutdown=5
        )
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [self._socket]}, name=self.name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                url = self.url
                self.stop()
                raise RuntimeError(f"the {self.name} did not start on {url}; see the log above")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# The name capture's callers know.
CaptureServer = ThreadedServer
