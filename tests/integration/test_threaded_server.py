"""In-process servers (capture, engine, the workbench's proxy) share one uvicorn runner."""

import logging
import socket

import httpx

from workbench.engine.runner import EngineServer


def test_engine_socket_is_tcp_so_keepalive_answers_do_not_wait_for_delayed_ack():
    # asyncio sets TCP_NODELAY on accepted connections only when the listening socket's proto
    # is IPPROTO_TCP; a proto-0 socket stalled every keep-alive answer ~40 ms.
    with EngineServer() as engine:
        assert engine.listener is not None
        assert engine.listener.proto == socket.IPPROTO_TCP
        with httpx.Client(base_url=engine.url) as client:
            assert client.get("/v1/models").status_code == 200
            assert client.get("/v1/models").status_code == 200


def test_starting_an_engine_leaves_the_host_apps_uvicorn_loggers_alone():
    # A host app (`workbench serve`) configured uvicorn's loggers at INFO; the embedded engine
    # starting later once reset them (dictConfig) and set them to WARNING, silencing the app.
    names = ("uvicorn", "uvicorn.error", "uvicorn.access")
    saved = {name: _state(logging.getLogger(name)) for name in names}
    handler = logging.NullHandler()
    try:
        for name in names:
            logging.getLogger(name).setLevel(logging.INFO)
        logging.getLogger("uvicorn.access").addHandler(handler)
        before = {name: _state(logging.getLogger(name)) for name in names}
        with EngineServer():
            assert {name: _state(logging.getLogger(name)) for name in names} == before
    finally:
        logging.getLogger("uvicorn.access").removeHandler(handler)
        for name, (level, handlers, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate


def _state(logger: logging.Logger) -> tuple[int, list[logging.Handler], bool]:
    return logger.level, list(logger.handlers), logger.propagate
