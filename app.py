"""Harbor Workbench: the Gradio UI at `/`, the capture proxy at `/capture`, one port.

    python app.py [--host HOST] [--port PORT]     (`make run`; the Space's Docker CMD)

With no engine configured it starts the embedded reference engine (scripted for the demo
tasks), offers the bundled `demo` dataset, the `local` sandbox when usable, and terminus-2.
Settings come from WORKBENCH_* variables (workbench/settings.py).
"""

import argparse

from workbench.settings import Settings
from workbench.ui.server import build_app, serve

__all__ = ["build_app", "main"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", help="bind address (default: WORKBENCH_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: WORKBENCH_PORT or 7860)")
    args = parser.parse_args(argv)
    settings = Settings()
    update = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    serve(settings.model_copy(update=update))


if __name__ == "__main__":
    main()
