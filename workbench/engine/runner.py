"""Run the engine in-process on a free loopback port (tests, the embedded workbench engine)."""

from capture.serving import ThreadedServer
from workbench.engine.config import EngineConfig
from workbench.engine.server import create_engine_app


class EngineServer(ThreadedServer):
    """The reference engine served by `ThreadedServer` on `host` (127.0.0.1), `port` (0 = free).

    with EngineServer(EngineConfig(script=policy)) as eng:
        client = openai.OpenAI(base_url=eng.url + "/v1", api_key="none")

    `url` has no `/v1` suffix. `start()` returns once the port accepts connections; `stop()`
    shuts uvicorn down and joins the thread. Both are idempotent.
    """

    def __init__(
        self, config: EngineConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        super().__init__(None, host, port, lifespan="off", name="reference engine")
        self.config = config or EngineConfig()

    def start(self, timeout: float = 30.0) -> "EngineServer":
        if self.app is None:
            self.app = create_engine_app(self.config)
        return super().start(timeout)
