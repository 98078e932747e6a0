"""`workbench info`: a read-only report of what this machine can run.

The engine's measured tier (one probe: the only thing it contacts), each sandbox with why it is
usable or not, each dataset with its task count, and the harnesses grouped by dialect. It boots
no sandbox or server, and no engine unless asked for `--engine embedded` (the reference engine,
started for the probe and stopped). The same report renders as rich tables or as JSON.
"""

import asyncio
import json

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from capture.engines import EnginePool, EngineRef
from capture.types import DIALECTS
from workbench.datasets import DatasetError, aresolve_dataset
from workbench.harnesses import HarnessInfo, harness_catalogue
from workbench.sandboxes import SandboxInfo, asandbox_catalogue
from workbench.service import EMBEDDED, embedded_engine

NOT_REDIRECTABLE = "not redirectable"


class EngineReport(BaseModel):
    url: str | None
    probed: bool
    reachable: bool | None = None
    tier: str | None = None
    reason: str | None = None  # why not `tokens` (or why not probed)
    served_model: str | None = None
    logprobs_mode: str | None = None
    version: str | None = None  # the engine's GET /version


class DatasetReport(BaseModel):
    spec: str
    name: str | None = None
    tasks: int | None = None
    error: str | None = None


class InfoReport(BaseModel):
    engine: EngineReport
    sandboxes: list[SandboxInfo]
    datasets: list[DatasetReport]
    harnesses: list[HarnessInfo]
    by_dialect: dict[str, list[str]]  # dialect (or "not redirectable") -> harness names


async def probe_engine(url: str | None) -> EngineReport:
    """Measure the engine's tier with capture's own probe; never raises. `embedded` probes the
    reference engine `workbench rollout --engine embedded` would use, started just for this."""
    if not url:
        reason = "not probed: pass --engine URL (or --engine embedded)"
        return EngineReport(url=None, probed=False, reason=reason)
    if url.strip() == EMBEDDED:
        engine = embedded_engine()
        try:
            await asyncio.to_thread(engine.start)
        except Exception as exc:  # e.g. the tokenizer files are missing: say so, do not raise
            reason = f"not probed: the embedded engine did not start ({exc})"
            return EngineReport(url=EMBEDDED, probed=False, reason=reason)
        try:
            report = await probe_engine(engine.url)
        finally:
            await asyncio.to_thread(engine.stop)
        return report.model_copy(
            update={"url": f"{EMBEDDED} ({report.url}, stopped after the probe)"}
        )
    try:
        ref = EngineRef(url=url)
    except ValidationError as exc:
        reason = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        return EngineReport(url=url, probed=False, reason=f"not probed: {reason}")
    pool = EnginePool(probe_timeout_s=10.0)
    try:
        handle = await pool.get(ref)
    finally:
        await pool.aclose()
    probe = handle.probe
    return EngineReport(
        url=ref.public_url,
        probed=True,
        reachable=probe.reachable,
        tier=probe.tier,
        reason=probe.tier_reason,
        served_model=probe.served_model or None,
        logprobs_mode=probe.logprobs_mode,
        version=probe.version,
    )


async def dataset_report(spec: str) -> DatasetReport:
    try:
        dataset = await aresolve_dataset(spec)
    except DatasetError as exc:
        return DatasetReport(spec=spec, error=str(exc))
    return DatasetReport(spec=spec, name=dataset.name, tasks=len(dataset.tasks))


def group_by_dialect(harnesses: list[HarnessInfo]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {d: [] for d in DIALECTS}
    groups[NOT_REDIRECTABLE] = []
    for harness in harnesses:
        if not harness.redirectable:
            groups[NOT_REDIRECTABLE].append(harness.name)
        for dialect in harness.dialects if harness.redirectable else ():
            groups[dialect].append(harness.name)
    return groups


async def gather(engine: str | None, datasets: list[str]) -> InfoReport:
    """Everything at once: the engine probe, sandbox preflights, datasets, agent imports."""
    engine_report, sandboxes, harnesses, *dataset_reports = await asyncio.gather(
        probe_engine(engine),
        asandbox_catalogue(),
        asyncio.to_thread(harness_catalogue),
        *(dataset_report(spec) for spec in datasets),
    )
    return InfoReport(
        engine=engine_report,
        sandboxes=sandboxes,
        datasets=dataset_reports,
        harnesses=list(harnesses),
        by_dialect=group_by_dialect(list(harnesses)),
    )


def render(report: InfoReport, console: Console) -> None:
    engine = report.engine
    tier = engine.tier if engine.probed and engine.reachable else "—"
    why = engine.reason or (
        "trainable: prompt ids, sampled ids and logprobs" if engine.probed else ""
    )
    rows = [
        ["url", engine.url or "—"],
        ["tier", _mark(tier, tier == "tokens")],
        ["model", engine.served_model or "—"],
        ["logprobs", engine.logprobs_mode or "—"],
        ["version", engine.version or "—"],
        ["why", why],
    ]
    console.print(_table("Engine", ("field", "value"), rows, show_header=False))

    sandboxes = sorted(report.sandboxes, key=lambda s: (not s.usable, s.name != "local", s.name))
    rows = [[s.name, _mark("yes" if s.usable else "no", s.usable), s.reason] for s in sandboxes]
    console.print(_table("Sandboxes", ("sandbox", "usable", "why"), rows))

    rows = [
        [d.spec, d.name or "—", "—" if d.tasks is None else str(d.tasks), d.error or ""]
        for d in report.datasets
    ]
    console.print(_table("Datasets", ("spec", "name", "tasks", "error"), rows))

    host_side = {h.name for h in report.harnesses if h.host_side}
    rows = [
        [dialect, str(len(names)), ", ".join(n + ("*" if n in host_side else "") for n in names)]
        for dialect, names in report.by_dialect.items()
    ]
    title = "Harnesses by dialect (* = runs host-side)"
    console.print(_table(title, ("dialect", "count", "harnesses"), rows))


def _table(
    title: str, columns: tuple[str, ...], rows: list[list[str | Text]], *, show_header=True
) -> Table:
    table = Table(title=title, show_header=show_header)
    for column in columns:
        table.add_column(column)
    for row in rows:
        # Text cells, so reasons such as "pip install 'harbor[e2b]'" are not read as markup.
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    return table


def _mark(text: str, good: bool) -> Text:
    return Text(text, style="green" if good else "red")


def info_command(engine: str | None, datasets: list[str], as_json: bool) -> int:
    report = asyncio.run(gather(engine, datasets or ["demo"]))
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        render(report, Console())
    return 0
