"""The `workbench` command line: info, rollout, golden, serve, push, engine.

Each command lives in this file as one small function that delegates to the module doing the
work, so `workbench --help` is the whole surface in one place.
"""

import typer

app = typer.Typer(
    name="workbench",
    help="Turn Harbor agent benchmarks into RL data (token ids, logprobs, rewards).",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def engine(
    port: int = typer.Option(8001, help="Port to serve the reference engine on."),
    host: str = typer.Option("127.0.0.1"),
) -> None:
    """Run the CPU reference engine (vLLM wire format); same as `python -m workbench.engine`."""
    from workbench.engine.__main__ import main as engine_main

    engine_main(["--host", host, "--port", str(port)])


def main() -> None:
    app()


if __name__ == "__main__":
    main()
