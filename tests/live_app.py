"""The real workbench app (app.build_app) served by uvicorn on a free loopback port, in a thread.

Shared by the client, notebook and browser tests: one app per test module, its own home dir.
"""

import socket
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from app import build_app
from workbench.settings import Settings


class LiveApp:
    """`with LiveApp(home) as app:` → `app.url` (no trailing slash), `app.settings`."""

    def __init__(self, home: Path, **settings: object) -> None:
        self.home = home
        self.extra = settings
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "LiveApp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        self.settings = Settings(home=self.home, host="127.0.0.1", port=port, **self.extra)
        app = build_app(self.settings)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="live-app", daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the workbench app did not start; see the log above")
            time.sleep(0.05)
        httpx.get(self.url + "/", timeout=30).raise_for_status()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
