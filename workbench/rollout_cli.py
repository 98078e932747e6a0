"""Bodies of `workbench rollout` and `workbench golden` (cli.py holds only their signatures).

No server: the capture proxy is served in-process on a free loopback port, and `--engine
embedded` starts the reference engine (demo script) in-process too.
"""

import asyncio
import contextlib
import json
import logging
import shutil
import signal
import time
from pathlib import Path
from typing import cast

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from capture.engines import EngineRef
from capture.sessions import Session
from capture.types import DIALECTS, Dialect
from workbench.datasets import DatasetError, TaskInfo, default_resolver, resolve_dataset
from workbench.golden import OracleResult, run_oracle
from workbench.harnesses import get_harness
from workbench.network_fit import network_problem
from workbench.rollout import RolloutRequest, RolloutResult
from workbench.sandboxes import get_sandbox
from workbench.service import EMBEDDED, WorkbenchService
from workbench.settings import Settings

PHASE_STEPS = {"queued": 0, "booting": 1, "agent": 2, "verifying": 3, "done": 4}
# LiteLLM warns on every rollout that the served model has no built-in price; it is not ours to
# price, and the warning would break the progress bars.
logging.getLogger("LiteLLM").setLevel(logging.ERROR)


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


def pick_tasks(dataset: str, task: str | None, task_index: int | None) -> list[TaskInfo]:
    """The task(s) the command runs: by name, by index, or (golden) all of them."""
    try:
        tasks = resolve_dataset(dataset).tasks
    except DatasetError as exc:
        raise UsageError(f"dataset {dataset!r}: {exc}") from exc
    if not tasks:
        raise UsageError(f"dataset {dataset!r} has no tasks")
    if task is not None and task_index is not None:
        raise UsageError("give --task or --task-index, not both")
    if task is not None:
        found = [t for t in tasks if task in (t.name, t.name.rsplit("/", 1)[-1], t.path.name)]
        if not found:
            names = ", ".join(t.name for t in tasks)
            raise UsageError(f"no task {task!r} in {dataset!r}; tasks: {names}")
        return found[:1]
    if task_index is not None:
        if not 0 <= task_index < len(tasks):
            raise UsageError(f"--task-index must be in 0..{len(tasks) - 1} for {dataset!r}")
        return [tasks[task_index]]
    return tasks


def rollout_command(
    *,
    engine: str,
    dataset: str,
    task: str | None,
    task_index: int | None,
    n: int,
    harness: str,
    sandbox: str,
    model: str | None,
    reward_key: str | None,
    timeout: float | None,
    concurrency: int,
    out: Path | None,
    dialect: str | None,
    console: Console | None = None,
) -> int:
    """Run N rollouts of one task; print a summary table and the document paths. Returns the
    exit code: 0 when every rollout is ok, 1 otherwise, 2 for bad input."""
    console = console or Console()
    try:
        if task is None and task_index is None:
            raise UsageError("give --task NAME or --task-index I")
        if dialect is not None and dialect not in DIALECTS:
            raise UsageError(f"--dialect must be one of {', '.join(DIALECTS)}")
        if n < 1 or concurrency < 1:
            raise UsageError("-n and --concurrency must be at least 1")
        (info,) = pick_tasks(dataset, task, task_index)
        engine_ref = None if engine == EMBEDDED else _engine_ref(engine)
        _check_harness_and_sandbox(info, harness, sandbox)
    except UsageError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    service = _service(concurrency)
    try:
        if engine_ref is None:
            engine_ref = service.start_embedded_engine()
        service.serve_proxy()
        job = "rollout-" + time.strftime("%Y%m%d-%H%M%S")
        request = RolloutRequest(
            dataset=dataset,
            task=info.name,
            harness=harness,
            sandbox=sandbox,
            engine=engine_ref,
            model=model,
            dialect=cast(Dialect | None, dialect),
            timeout_s=timeout,
            reward_key=reward_key,
            job=job,
            group=job if n > 1 else None,  # N samples of one task form one group
        )
        console.print(
            f"{n} rollout(s) of [bold]{info.name}[/bold] with {harness} in {sandbox} "
            f"on {engine_ref.public_url} (proxy {service.proxy_url})"
        )
        results = asyncio.run(_run_many(service, request, n, console))
    finally:
        service.close()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for result in results:
            if result.document_path:
                shutil.copy(result.document_path, out / f"{result.id}.json")
    _print_summary(console, results, out)
    return 0 if all(r.ok for r in results) else 1


def _service(concurrency: int) -> WorkbenchService:
    """A command's service: WORKBENCH_* settings, `concurrency` rollouts at once, and the
    dataset resolver of that home (the one `pick_tasks` used: the dataset resolves once)."""
    settings = Settings()
    settings.max_rollouts = concurrency
    return WorkbenchService(settings, default_resolver())


def _check_harness_and_sandbox(task: TaskInfo, harness: str, sandbox: str) -> None:
    """Refuse an unknown harness, an unusable sandbox or a combination that cannot reach the
    proxy before anything starts (this also pays Harbor's agent imports up front, so rollout
    timings measure rollouts)."""
    try:
        harness_info = get_harness(harness)
        info = get_sandbox(sandbox)
    except (KeyError, ImportError) as exc:
        raise UsageError(str(exc).strip("'\"")) from exc
    if not info.usable:
        raise UsageError(f"sandbox {sandbox!r} is not usable here: {info.reason}")
    problem = network_problem(task, harness_info, info)
    if problem is not None:
        raise UsageError(problem)


def _engine_ref(engine: str) -> EngineRef:
    try:
        return EngineRef(url=engine)
    except ValueError as exc:
        raise UsageError(
            f"--engine must be an http(s) URL of a vLLM-compatible server or 'embedded': {exc}"
        ) from exc


async def _run_many(
    service: WorkbenchService, request: RolloutRequest, n: int, console: Console
) -> list[RolloutResult]:
    sessions: dict[int, Session] = {}
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]#{task.fields[k]}[/bold]"),
        BarColumn(bar_width=20),
        TextColumn("{task.fields[phase]:<9}"),
        TextColumn("turns {task.fields[turns]:>3}  tokens {task.fields[tokens]:>7}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bars = [
            progress.add_task("", total=4, k=k, phase="queued", turns=0, tokens=0) for k in range(n)
        ]

        def watcher(k: int):
            def on_status(phase: str) -> None:
                progress.update(bars[k], completed=PHASE_STEPS[phase], phase=phase)

            def on_session(session: Session) -> None:
                sessions[k] = session

            return on_status, on_session

        cancel = _cancel_on_interrupt(console)

        async def one(k: int) -> RolloutResult:
            on_status, on_session = watcher(k)
            return await service.run(request, on_status, on_session=on_session, cancel=cancel)

        async def tick() -> None:
            while True:
                for k, session in list(sessions.items()):
                    c = session.counters()
                    progress.update(
                        bars[k], turns=c.turns, tokens=c.prompt_tokens + c.completion_tokens
                    )
                await asyncio.sleep(0.25)

        ticker = asyncio.create_task(tick())
        try:
            results = await asyncio.gather(*(one(k) for k in range(n)))
        finally:
            ticker.cancel()
        for k, result in enumerate(results):
            progress.update(bars[k], turns=result.turns, tokens=result.tokens)
    return list(results)


def _cancel_on_interrupt(console: Console) -> asyncio.Event:
    """First Ctrl-C cancels every rollout (sandboxes stopped, results kept and printed); a
    second one interrupts at once."""
    cancel = asyncio.Event()
    loop = asyncio.get_running_loop()

    def interrupted() -> None:
        console.print("[yellow]cancelling: stopping sandboxes (Ctrl-C again to abort)[/yellow]")
        cancel.set()
        loop.remove_signal_handler(signal.SIGINT)

    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals off the main thread
        loop.add_signal_handler(signal.SIGINT, interrupted)
    return cancel


def _print_summary(console: Console, results: list[RolloutResult], out: Path | None) -> None:
    table = Table(title="rollouts")
    for column in ("#", "ok", "reward", "turns", "tokens", "tier", "atif", "s"):
        table.add_column(column, no_wrap=True)
    table.add_column("error", overflow="fold")
    for k, r in enumerate(results):
        table.add_row(
            str(k),
            "[green]ok[/green]" if r.ok else "[red]no[/red]",
            "None" if r.reward is None else f"{r.reward:g}",
            str(r.turns),
            str(r.tokens),
            r.tier or "-",
            r.atif.verdict if r.atif else "-",
            f"{r.seconds:.1f}",
            f"{r.error.kind}: {r.error.message}" if r.error else "",
        )
    console.print(table)
    for k, r in enumerate(results):
        path = out / f"{r.id}.json" if out is not None else r.document_path
        console.print(f"#{k} document: {path}", soft_wrap=True)


def golden_command(
    *,
    dataset: str,
    sandbox: str,
    timeout: float | None,
    concurrency: int,
    console: Console | None = None,
) -> int:
    """Run the oracle over every task; exit 0 only when every task scores 1.0."""
    console = console or Console()
    try:
        tasks = pick_tasks(dataset, None, None)
    except UsageError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    service = _service(concurrency)

    async def all_tasks() -> list[OracleResult]:
        async def one(info: TaskInfo) -> OracleResult:
            async with service.rollout_slots:
                return await run_oracle(
                    dataset,
                    info.name,
                    sandbox,
                    service.store,
                    service.datasets,
                    sandbox_slots=service.sandbox_slots,
                    sandbox_root=service.settings.sandbox_root,
                    timeout_s=timeout,
                )

        with console.status(f"oracle over {len(tasks)} task(s) of {dataset!r} in {sandbox}"):
            return list(await asyncio.gather(*(one(t) for t in tasks)))

    try:
        results = asyncio.run(all_tasks())
    finally:
        service.close()
    _print_golden(console, results)
    return 0 if all(r.passed for r in results) else 1


def _print_golden(console: Console, results: list[OracleResult]) -> None:
    table = Table(title="golden (oracle)")
    for column in ("task", "result", "reward", "s"):
        table.add_column(column, no_wrap=True)
    table.add_column("error", no_wrap=True)
    for r in results:
        table.add_row(
            r.task,
            "[green]pass[/green]" if r.passed else "[red]FAIL[/red]",
            "None" if r.reward is None else f"{r.reward:g}",
            f"{r.seconds:.1f}",
            r.error.kind if r.error else "",
        )
    console.print(table)
    for r in results:
        if not r.passed:
            console.rule(f"{r.task}: tail of verifier/test-stdout.txt")
            if r.error:
                console.print(f"{r.error.kind}: {r.error.message}", markup=False, highlight=False)
            console.print(f"rewards: {json.dumps(r.rewards)}", markup=False, highlight=False)
            console.print(r.test_log_tail or "(no test log)", markup=False, highlight=False)
            if r.trial_dir:
                console.print(f"trial dir: {r.trial_dir}", soft_wrap=True)
    passed = sum(r.passed for r in results)
    console.print(f"{passed}/{len(results)} task(s) pass with the oracle")
