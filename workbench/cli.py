"""The `workbench` command line: info, rollout, golden, serve, push, engine.

Each command lives in this file as one small function that delegates to the module doing the
work, so `workbench --help` is the whole surface in one place.
"""

from pathlib import Path

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
    served_model_name: str = typer.Option("workbench-ref"),
    logprobs_mode: str = typer.Option("processed_logprobs", help="processed_logprobs|raw_logprobs"),
    script: str | None = typer.Option(None, help="JSON scripted policy (see engine/script.py)."),
    seed: int = typer.Option(0, help="Seed for requests that carry no `seed`."),
    return_tokens_as_token_ids: bool = typer.Option(False, "--return-tokens-as-token-ids"),
    no_token_ids: bool = typer.Option(False, "--no-token-ids", help="Ignore return_token_ids."),
) -> None:
    """Run the CPU reference engine (vLLM wire format); same as `python -m workbench.engine`."""
    from workbench.engine.__main__ import main as engine_main

    argv = ["--host", host, "--port", str(port), "--served-model-name", served_model_name]
    argv += ["--logprobs-mode", logprobs_mode, "--seed", str(seed)]
    argv += ["--script", script] if script else []
    argv += ["--return-tokens-as-token-ids"] if return_tokens_as_token_ids else []
    argv += ["--no-token-ids"] if no_token_ids else []
    engine_main(argv)


@app.command()
def rollout(
    engine: str = typer.Option(
        ..., help="Engine URL (vLLM-compatible) or 'embedded' for the reference engine."
    ),
    dataset: str = typer.Option(..., help="Dataset spec, e.g. 'demo' or a task directory."),
    task: str | None = typer.Option(None, help="Task name."),
    task_index: int | None = typer.Option(None, help="Task index in the dataset."),
    n: int = typer.Option(1, "-n", help="Number of rollouts."),
    harness: str = typer.Option(..., help="Harbor agent name (terminus-2) or module:Class."),
    sandbox: str = typer.Option(..., help="Sandbox name, e.g. local (see `workbench info`)."),
    model: str | None = typer.Option(None, help="Model name given to the harness."),
    reward_key: str | None = typer.Option(None, help="Scalar key of a multi-key reward."),
    timeout: float | None = typer.Option(None, help="Hard deadline per rollout (s)."),
    concurrency: int = typer.Option(4, help="Rollouts at once."),
    out: Path | None = typer.Option(None, help="Also copy the documents into this directory."),
    dialect: str | None = typer.Option(None, help="chat | responses | anthropic | google."),
) -> None:
    """Run N rollouts of one task and write one rollout document each (no server needed)."""
    from workbench.rollout_cli import rollout_command

    raise typer.Exit(
        rollout_command(
            engine=engine,
            dataset=dataset,
            task=task,
            task_index=task_index,
            n=n,
            harness=harness,
            sandbox=sandbox,
            model=model,
            reward_key=reward_key,
            timeout=timeout,
            concurrency=concurrency,
            out=out,
            dialect=dialect,
        )
    )


@app.command()
def golden(
    dataset: str = typer.Option(..., help="Dataset spec, e.g. 'demo'."),
    sandbox: str = typer.Option("local", help="Sandbox name."),
    timeout: float | None = typer.Option(None, help="Hard deadline per task (s)."),
    concurrency: int = typer.Option(2, help="Tasks at once."),
) -> None:
    """Run the oracle over every task: the infrastructure baseline before any training."""
    from workbench.rollout_cli import golden_command

    raise typer.Exit(
        golden_command(dataset=dataset, sandbox=sandbox, timeout=timeout, concurrency=concurrency)
    )


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Bind address; non-loopback is public."),
    port: int = typer.Option(7860, help="One port: UI at /, capture proxy at /capture."),
    engine: str | None = typer.Option(None, help="Engine URL offered first (default: embedded)."),
    dataset: list[str] | None = typer.Option(None, help="Dataset spec to offer (repeatable)."),
    admin_key_env: str | None = typer.Option(
        None,
        help="Env var holding the admin key; a public bind without one keeps the control "
        "plane closed.",
    ),
) -> None:
    """Serve the workbench UI and the capture proxy (the same app as `python app.py`)."""
    from workbench.ui.server import serve as serve_app
    from workbench.ui.server import serve_settings

    try:
        settings = serve_settings(
            host=host, port=port, engine=engine, datasets=dataset or (), admin_key_env=admin_key_env
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    serve_app(settings)


@app.command()
def push(
    space: str = typer.Argument(..., help="Space id: owner/name."),
    secret: list[str] | None = typer.Option(
        None, help="Env var copied to the Space as a secret (repeatable)."
    ),
    private: bool = typer.Option(False, help="Create the Space private."),
    root: Path = typer.Option(Path("."), help="Repository root (holds the Dockerfile)."),
) -> None:
    """Deploy this repository to a Hugging Face Docker Space."""
    from workbench.push import PushError
    from workbench.push import push as push_space

    try:
        result = push_space(space, root=root.resolve(), secrets=secret or (), private=private)
    except PushError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"deployed {result.repo_id}: {result.url} (secrets: {', '.join(result.secrets)})")


@app.command()
def info(
    engine: str | None = typer.Option(None, help="Engine URL to probe for its tier."),
    dataset: list[str] | None = typer.Option(None, help="Dataset spec (repeatable; default demo)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Report the engine's tier, usable sandboxes, datasets and harnesses (boots nothing)."""
    from workbench.info import info_command

    raise typer.Exit(info_command(engine=engine, datasets=dataset or [], as_json=as_json))


@app.command()
def export(
    documents: list[Path] = typer.Argument(..., help="Rollout document JSON files."),
    out: Path = typer.Option(..., help="JSONL file to write."),
    shape: str = typer.Option("trace", help="'trace' (TRL TraceEntry per turn) or 'sequences'."),
) -> None:
    """Convert rollout documents into trainer JSONL (one record per agent turn or sequence)."""
    import json

    from capture.exporters import sequence_records, trace_entries, write_jsonl

    shapes = {"trace": trace_entries, "sequences": sequence_records}
    if shape not in shapes:
        typer.echo(f"error: --shape must be one of {', '.join(shapes)}", err=True)
        raise typer.Exit(2)
    records = []
    for path in documents:
        try:
            records += shapes[shape](json.loads(path.read_text()))
        except (OSError, ValueError) as exc:  # unreadable, not JSON, or not a rollout document
            typer.echo(f"error: {path}: {exc}", err=True)
            raise typer.Exit(1) from exc
    typer.echo(f"wrote {write_jsonl(records, out)} {shape} records to {out}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
