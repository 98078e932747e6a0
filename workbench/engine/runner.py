"""Run the engine in-process on a free loopback port (tests, the embedded workbench engine)."""

import socket
import threading
import time

import uvicorn

from workbench.engine.config import EngineConfig
from workbench.engine.server import create_engine_app


class EngineServer:
    """uvicorn in a daemon thread, bound to `host` (127.0.0.1) on `port` (0 = a free one).

    with EngineServer(EngineConfig(script=policy)) as eng:
        client = openai.OpenAI(base_url=eng.url + "/v1", api_key="none")

    `url` has no `/v1` suffix. `start()` returns once the port accepts connections; `stop()`
    shuts uvicorn down and joins the thread. Both are idempotent.
    """

    def __init__(
        self, config: EngineConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.config = config or EngineConfig()
        self.host = host
        self._want_port = port  # 0: any free port
        self.port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("EngineServer is not started; call start() or use `with`.")
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "EngineServer":
        if self._thread is not None:
            return self
        app = create_engine_app(self.config)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._want_port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="workbench-engine",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the reference engine did not start; see the log above.")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> "EngineServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
