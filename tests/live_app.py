"""The real workbench app (app.build_app) served by uvicorn on a free loopback port, in a thread.

Shared by the client, notebook and browser tests: one app per test module, its own home dir.
"""

from pathlib import Path

import httpx

from app import build_app
from capture.serving import ThreadedServer
from workbench.settings import Settings


class LiveApp:
    """`with LiveApp(home) as app:` → `app.url` (no trailing slash), `app.settings`."""

    def __init__(self, home: Path, **settings: object) -> None:
        self.home = home
        self.extra = settings
        self.url = ""
        self._server = ThreadedServer(host="127.0.0.1", port=0, name="workbench app")

    def __enter__(self) -> "LiveApp":
        # The app must know its own port (the proxy URL it hands harnesses): bind first.
        port = self._server.bind()
        self.settings = Settings(home=self.home, host="127.0.0.1", port=port, **self.extra)
        self._server.app = build_app(self.settings)
        self._server.start(timeout_s=60)
        self.url = self._server.url
        httpx.get(self.url + "/", timeout=30).raise_for_status()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
