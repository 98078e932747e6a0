"""The one ASGI app: the capture proxy at `/capture`, the Gradio UI at `/`, one port.

`app.py` (the Space entry point) and `workbench serve` both build it here; `workbench` never
imports `app`.
"""

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import gradio as gr
import uvicorn
from fastapi import FastAPI

from capture.settings import is_public_host
from workbench.service import WorkbenchService
from workbench.settings import Settings
from workbench.ui import style
from workbench.ui.layout import allowed_paths, build_ui

log = logging.getLogger(__name__)


def proxy_url(settings: Settings) -> str:
    """Where harnesses reach the capture proxy: WORKBENCH_PUBLIC_URL, else the Space's public
    URL, else loopback on our own port (harnesses run on this machine)."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    if settings.space_host:
        return f"https://{settings.space_host}/capture"
    return f"http://127.0.0.1:{settings.port}/capture"


def control_plane_note(settings: Settings) -> str | None:
    """Why the capture control plane is closed, when it is."""
    public = is_public_host(settings.host) or settings.space_host is not None
    if public and not settings.admin_key:
        return (
            "the capture control plane (/capture/sessions) is closed: this server is public and "
            "has no admin key (set WORKBENCH_ADMIN_KEY, or `workbench serve --admin-key-env NAME`)"
        )
    return None


def build_app(settings: Settings | None = None) -> FastAPI:
    """The app. Its lifespan starts the embedded engine (when no engine URL is configured) and
    closes the service on shutdown."""
    settings = settings or Settings()
    if settings.space_host and not is_public_host(settings.host):
        # A Space is public whatever the bind address says.
        settings = settings.model_copy(update={"host": "0.0.0.0"})
    service = WorkbenchService(settings)
    service.proxy_url = proxy_url(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if note := control_plane_note(settings):
            log.warning(note)
        if settings.engine_url is None:
            try:
                await asyncio.to_thread(service.start_embedded_engine)
            except Exception as exc:  # the UI still works with an engine URL
                log.error("the embedded engine did not start (%s); use an engine URL", exc)
        try:
            yield
        finally:
            await asyncio.to_thread(service.close)

    app = FastAPI(title="Harbor Workbench", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    app.mount("/capture", service.capture_app)
    return gr.mount_gradio_app(
        app,
        build_ui(service, settings),
        path="/",
        server_name=settings.host,
        server_port=settings.port,
        footer_links=["api", "gradio", "settings"],
        run_history=False,
        allowed_paths=allowed_paths(service),
        ssr_mode=False,
        theme=style.theme(),
        css=style.CSS,
    )


def serve(settings: Settings) -> None:
    """Build the app and serve it with uvicorn (blocks)."""
    uvicorn.run(build_app(settings), host=settings.host, port=settings.port, log_level="info")


def serve_settings(
    *,
    host: str,
    port: int,
    engine: str | None = None,
    datasets: Sequence[str] = (),
    admin_key_env: str | None = None,
) -> Settings:
    """Settings for `workbench serve`: flags override WORKBENCH_* variables."""
    update: dict = {"host": host, "port": port}
    if engine:
        update["engine_url"] = engine
    if datasets:
        update["datasets"] = list(datasets)
    if admin_key_env:
        key = os.environ.get(
            admin_key_env
        )  # the flag names the variable; its value stays out of argv
        if not key:
            raise ValueError(f"--admin-key-env {admin_key_env}: ${admin_key_env} is not set")
        update["admin_key"] = key
    return Settings().model_copy(update=update)
