"""One rollout: a Harbor trial whose model calls go through a capture session.

`run_rollout(request, context)` resolves the task, harness and sandbox, creates a capture
session on the request's engine, runs the trial (`workbench.harbor_trial`: config, preflights,
one hard deadline, cancellation, sandbox stopped on every path), then turns what happened into a
`RolloutResult`: rewards, ATIF verdict, the rollout document (stored) and, when anything went
wrong, one typed error (`workbench.failures`). It never raises.
"""

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from capture.document import DocumentMeta, EngineMeta, build_document, validate_document
from capture.engines import EngineRef
from capture.graph import RolloutGraph
from capture.sessions import Session, SessionRegistry
from capture.types import TIER_RANK, Dialect, Phase, Tier
from capture.validate import Finding, check_rollout
from workbench.atif import AtifReport, CapturedCall, reconcile
from workbench.datasets import DatasetError, DatasetResolver, TaskInfo
from workbench.failures import Failure, RolloutError, trial_error
from workbench.harbor_trial import (
    ModelConnection,
    SessionKeys,
    SlotGate,
    TrialRun,
    bounded,
    build_trial_config,
    preflight,
)
from workbench.harnesses import HarnessInfo, get_harness
from workbench.network_fit import WHAT_TO_DO, network_problem
from workbench.rewards import reward_provenance, select_reward
from workbench.sandboxes import SandboxCatalogue, SandboxInfo
from workbench.store import RolloutRow, Store

log = logging.getLogger(__name__)

StatusCallback = Callable[[Phase], None]


class RolloutRequest(BaseModel):
    """One rollout to run.

    dataset: a dataset spec (`demo`, a directory, a registry.json, ...; see workbench.datasets).
    task: the task's name within the dataset.
    harness: a Harbor agent name (`terminus-2`) or `module:Class`.
    sandbox: a sandbox name from the catalogue (`local`, `docker`, `daytona`, ...).
    engine: where the model calls go (captured by a session on it).
    model: the model name the harness is given; default: the engine's served model.
    dialect: the wire dialect the harness speaks; default: the harness's first one.
    timeout_s: one hard deadline for the whole trial; default: the task's agent + verifier
        timeouts plus two minutes for boot and setup.
    reward_key: which key of a multi-key rewards dict is the scalar reward.
    require_trainable: refuse engines below tier `tokens` (eval runs set False).
    job: Harbor job folder under `<home>/jobs/` (default: one per day).
    group: rollouts of one prompt sampled together (e.g. a GRPO group); kept in the document.
    labels: free-form tags stored with the rollout.
    """

    dataset: str
    task: str
    harness: str
    sandbox: str
    engine: EngineRef
    model: str | None = None
    dialect: Dialect | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    reward_key: str | None = None
    require_trainable: bool = True
    job: str | None = None
    group: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class RolloutResult(BaseModel):
    """What a rollout returns (never raised). `ok` only for a usable training row."""

    id: str
    ok: bool
    reward: float | None = None
    rewards: dict[str, float | int] | None = None
    reward_key: str | None = None
    error: RolloutError | None = None
    tier: Tier | None = None
    atif: AtifReport | None = None
    turns: int = 0
    tokens: int = 0
    seconds: float = 0.0
    session_id: str | None = None
    trial_dir: str | None = None
    document: dict[str, Any] = Field(default_factory=dict)
    document_path: str | None = None


@dataclass
class RolloutContext:
    """What a rollout needs from the service that runs it.

    registry: capture sessions (shared with the proxy serving `proxy_url`).
    proxy_url: where harnesses reach the capture proxy, without `/v1`.
    store: where the document, the live turn log and Harbor's trial dirs go.
    datasets: resolves the request's dataset (caching under the configured home).
    session_keys: the host env vars that carry session ids to harnesses (created up front).
    sandboxes: the sandbox verdicts (cached by the service across rollouts).
    sandbox_slots: limit on concurrent sandbox creations.
    sandbox_root: where the local sandbox creates per-trial roots (None: its default).
    cancel: set to cancel the rollout (its sandbox is stopped first).
    on_status: phase changes (queued, booting, agent, verifying, done).
    on_session: receives the capture session once created (live counters).
    """

    registry: SessionRegistry
    proxy_url: str
    store: Store
    datasets: DatasetResolver
    session_keys: SessionKeys
    sandboxes: SandboxCatalogue = field(default_factory=SandboxCatalogue)
    sandbox_slots: SlotGate | None = None
    sandbox_root: Path | None = None
    cancel: asyncio.Event | None = None
    on_status: StatusCallback | None = None
    on_session: Callable[[Session], None] | None = None


@dataclass
class _Run:
    """State of one rollout while it runs."""

    id: str
    request: RolloutRequest
    started: float = field(default_factory=time.monotonic)
    task: TaskInfo | None = None
    harness: HarnessInfo | None = None
    dialect: Dialect | None = None
    session: Session | None = None
    trial: TrialRun | None = None
    error: RolloutError | None = None


def new_rollout_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(4)


async def run_rollout(
    request: RolloutRequest, context: RolloutContext, *, rollout_id: str | None = None
) -> RolloutResult:
    """Run one rollout; see the module docstring. Never raises (cancellation included: a
    cancelled rollout returns `error.kind == "cancelled"` once its sandbox has stopped)."""
    run = _Run(id=rollout_id or new_rollout_id(), request=request)
    try:
        await _execute(run, context)
    except Failure as failure:
        run.error = failure.error
    except asyncio.CancelledError:
        run.error = RolloutError(kind="cancelled", message="the rollout was cancelled")
    except Exception as exc:  # a bug of ours: report it, never crash the caller
        log.exception("rollout %s failed internally", run.id)
        run.error = RolloutError(kind="internal", message=f"{type(exc).__name__}: {exc}")
    try:
        return _finish(run, context)
    except Exception as exc:
        log.exception("rollout %s could not be finished", run.id)
        return RolloutResult(
            id=run.id,
            ok=False,
            error=RolloutError(kind="internal", message=f"{type(exc).__name__}: {exc}"),
            seconds=round(time.monotonic() - run.started, 3),
        )
    finally:
        # The session id is the harness's API key: revoked on every path, _finish's failures too.
        if run.session is not None:
            context.registry.delete(run.session.id)
        _set_phase(run, context, "done")


def _set_phase(run: _Run, context: RolloutContext, phase: Phase) -> None:
    if run.session is not None:
        run.session.phase = phase
    if context.on_status is not None:
        try:
            context.on_status(phase)
        except Exception:
            log.exception("status callback failed")


async def _execute(run: _Run, context: RolloutContext) -> None:
    request = run.request
    # In a thread: the first lookups import Harbor's agents (litellm, seconds) and run the
    # sandbox's preflight (subprocesses); this loop may be serving other rollouts meanwhile.
    run.task, run.harness, sandbox = await asyncio.to_thread(_resolve, request, context)
    if not sandbox.usable:
        raise Failure("sandbox_unavailable", f"sandbox {sandbox.name!r}: {sandbox.reason}")
    problem = network_problem(run.task, run.harness, sandbox)
    if problem is not None:
        raise Failure("sandbox_unavailable", problem)
    run.dialect = _choose_dialect(run.harness, request.dialect)
    # One hard deadline from here on: the probe and preflight count, not only the trial.
    deadline = run.started + _timeout_s(request, run.task)

    # A fresh probe: the engine may have restarted with other flags since the last rollout.
    run.session = await bounded(
        context.registry.create(
            request.engine, {**request.labels, "rollout": run.id}, refresh_probe=True
        ),
        cancel=context.cancel,
        deadline=deadline,
        where="while probing the engine",
    )
    if context.on_session is not None:
        context.on_session(run.session)
    run.session.add_listener(context.store.turn_log(run.id))
    _check_engine(run.session, request.require_trainable)

    # The harness reads its key from this host env var (Harbor scrubs the value from the
    # trial dir); never AgentConfig.env, which terminus-2 exports into the sandbox shell.
    key_name = context.session_keys.acquire(run.session.id)
    try:
        connection = None
        if run.dialect is not None:
            model = request.model or run.session.engine.served_model or "workbench-ref"
            connection = ModelConnection(run.dialect, context.proxy_url, key_name, model)
        config = build_trial_config(
            task=run.task,
            harness=run.harness,
            sandbox=sandbox,
            trials_dir=trials_dir(context.store, request.job),
            connection=connection,
            sandbox_root=context.sandbox_root,
        )
        # In a thread: a sandbox preflight runs subprocesses (bwrap: up to seconds).
        await bounded(
            asyncio.to_thread(preflight, config),
            cancel=context.cancel,
            deadline=deadline,
            where="during the sandbox and agent preflights",
        )
        run.trial = TrialRun(
            config,
            deadline=deadline,
            cancel=context.cancel,
            sandbox_slots=context.sandbox_slots,
            on_phase=lambda phase: _set_phase(run, context, phase),
        )
        await run.trial.run()
    finally:
        context.session_keys.release(key_name)


def resolve_task(datasets: DatasetResolver, dataset: str, task: str) -> TaskInfo:
    """The task named `task` (full name, short name or directory name) in a dataset spec."""
    try:
        tasks = datasets.resolve(dataset).tasks
    except DatasetError as exc:
        raise Failure("invalid_request", f"dataset {dataset!r}: {exc}") from exc
    for info in tasks:
        if task in (info.name, info.name.rsplit("/", 1)[-1], Path(info.path).name):
            return info
    names = ", ".join(t.name for t in tasks[:20]) or "none"
    raise Failure("invalid_request", f"dataset {dataset!r} has no task {task!r} (tasks: {names})")


def trials_dir(store: Store, job: str | None) -> Path:
    return store.jobs_dir / (job or "workbench-" + datetime.now(UTC).strftime("%Y-%m-%d"))


def _resolve(
    request: RolloutRequest, context: RolloutContext
) -> tuple[TaskInfo, HarnessInfo, SandboxInfo]:
    return (
        resolve_task(context.datasets, request.dataset, request.task),
        _lookup(get_harness, request.harness, "harness"),
        _lookup(context.sandboxes.get, request.sandbox, "sandbox"),
    )


def _lookup(getter: Callable[[str], Any], name: str, what: str) -> Any:
    try:
        return getter(name)
    except (KeyError, ValueError, ImportError) as exc:
        raise Failure("invalid_request", f"unknown {what} {name!r}: {exc}") from exc


def _choose_dialect(harness: HarnessInfo, wanted: Dialect | None) -> Dialect | None:
    if not harness.redirectable:
        return None  # e.g. oracle, nop: no model calls to redirect
    if wanted is None:
        return harness.dialects[0]
    if wanted not in harness.dialects:
        raise Failure(
            "invalid_request",
            f"harness {harness.name!r} speaks {', '.join(harness.dialects)}, not {wanted!r}",
        )
    return wanted


def _check_engine(session: Session, require_trainable: bool) -> None:
    engine = session.engine
    if not engine.probe.reachable:
        raise Failure(
            "engine_unreachable",
            engine.tier_reason or f"engine {engine.ref.public_url} is unreachable",
        )
    if require_trainable and TIER_RANK[engine.tier] < TIER_RANK["tokens"]:
        raise Failure(
            "engine_not_trainable",
            f"engine {engine.ref.public_url} is tier {engine.tier!r}, not 'tokens': "
            f"{engine.tier_reason or 'it returns no token ids'}",
        )


def _timeout_s(request: RolloutRequest, task: TaskInfo) -> float:
    if request.timeout_s is not None:
        return request.timeout_s
    return (task.agent_timeout_s or 600.0) + (task.verifier_timeout_s or 600.0) + 120.0


# -- after the trial ----------------------------------------------------------------------------


def _finish(run: _Run, context: RolloutContext) -> RolloutResult:
    session = run.session
    result = run.trial.result if run.trial is not None else None
    trial = run.trial.trial if run.trial is not None else None
    trial_dir = trial.paths.trial_dir if trial is not None else None
    rewards = result.verifier_result.rewards if result and result.verifier_result else None
    selection = select_reward(rewards, run.request.reward_key)
    error = run.error or (trial_error(result) if result is not None else None)
    atif = None
    findings: list[Finding] = []
    if session is not None and trial is not None:
        interrupted = error is not None and error.kind in ("timeout", "cancelled")
        atif = _reconcile_atif(session, trial.paths.agent_dir, interrupted)
        if run.dialect is not None:
            tier = session.tier
            findings = session.with_graph(lambda g: check_rollout(g, agentic=True, tier=tier))
    if error is None:
        error = _classify(run, rewards, findings)
    error = _blame_engine(session, error)
    if error is None and selection.problem is not None:
        error = RolloutError(kind="reward_ambiguous", message=selection.problem)

    counters = session.counters() if session is not None else None
    out = RolloutResult(
        id=run.id,
        ok=error is None,
        reward=selection.reward,
        rewards=dict(rewards) if rewards is not None else None,
        reward_key=selection.key,
        error=error,
        tier=session.tier if session is not None else None,
        atif=atif,
        turns=counters.turns if counters is not None else 0,
        tokens=counters.prompt_tokens + counters.completion_tokens if counters is not None else 0,
        seconds=round(time.monotonic() - run.started, 3),
        session_id=session.id if session is not None else None,
        trial_dir=str(trial_dir) if trial_dir is not None else None,
    )
    meta = _document_meta(run, out, trial_dir)
    if session is not None:
        session.add_findings(findings)
        out.document = session.document(meta)
        # The session id is the harness's API key: revoke it now that the rollout is over.
        context.registry.delete(session.id)
    else:  # failed before a session existed: still a valid document that says why
        out.document = build_document(RolloutGraph(), [], meta)
    problems = validate_document(out.document)
    if problems:
        log.error("rollout %s: document fails its schema: %s", run.id, problems)
        out.error = out.error or RolloutError(
            kind="internal", message=f"the rollout document fails its schema: {problems}"
        )
    elif out.error is None and not out.document["ok"]:
        verdict = out.document["error"] or {"kind": "capture_invalid", "message": "not usable"}
        out.error = RolloutError(**verdict)  # the capture's own verdict
    out.ok = out.error is None
    out.document_path = str(context.store.save(_row(run, out), out.document))
    return out


def _classify(run: _Run, rewards: dict | None, findings: list[Finding]) -> RolloutError | None:
    """The first thing that makes a trial that ended cleanly unusable, or None."""
    if rewards is None:
        return RolloutError(
            kind="verifier_failed",
            message="the verifier produced no rewards (it did not run or wrote no reward file)",
        )
    session = run.session
    assert session is not None
    if session.counters().turns == 0:
        return RolloutError(kind="no_model_calls", message=_no_calls_reason(run))
    fatal = [f for f in (*session.all_findings(), *findings) if f.level == "FATAL"]
    if fatal:
        return RolloutError(kind="capture_invalid", message=f"{fatal[0].code}: {fatal[0].message}")
    if run.request.require_trainable and not _has_trainable_turn(session):
        return RolloutError(kind="capture_invalid", message="no trainable (agent, tokens) turn")
    return None


def _blame_engine(session: Session | None, error: RolloutError | None) -> RolloutError | None:
    """An agent that failed after the proxy lost the engine failed because of the engine."""
    if session is None or error is None or error.kind not in ("agent_failed", "no_model_calls"):
        return error
    last = session.last_error
    if last is None or "unreachable" not in last:
        return error
    return RolloutError(
        kind="engine_unreachable", message=f"{last} (then the harness failed: {error.message})"
    )


def _no_calls_reason(run: _Run) -> str:
    why = "no model calls were captured: "
    if run.dialect is None:
        return why + f"harness {run.request.harness!r} cannot be pointed at a model"
    sandboxed = run.harness is not None and not run.harness.host_side
    if sandboxed and run.task is not None and not run.task.network:
        return why + (
            f"{run.request.harness!r} runs inside the sandbox and task {run.task.name!r} has "
            f"no network, so it cannot reach the capture proxy; {WHAT_TO_DO}"
        )
    return why + "the harness never called the proxy (check its log in the trial dir)"


def _has_trainable_turn(session: Session) -> bool:
    return session.tier == "tokens" and session.with_graph(
        lambda graph: any(
            graph.role(i) == "agent" and not graph.node(i).discarded for i in range(len(graph))
        )
    )


def _reconcile_atif(session: Session, agent_dir: Path, interrupted: bool) -> AtifReport:
    calls = session.with_graph(
        lambda graph: [
            CapturedCall(index=i, completion_ids=tuple(graph.completion_ids(i).tolist()))
            for i in range(len(graph))
            if not graph.node(i).discarded
        ]
    )
    report = reconcile(agent_dir, calls, interrupted=interrupted)

    def demote(graph: RolloutGraph) -> None:
        for index in report.demoted:
            graph.demote(index)

    # Under the lock: a straggling call of the finished agent may still be ingested.
    session.with_graph(demote)
    return report


def _document_meta(run: _Run, out: RolloutResult, trial_dir: Path | None) -> DocumentMeta:
    if run.session is not None:
        meta = run.session.default_meta()
    else:
        meta = DocumentMeta(engine=EngineMeta(url=run.request.engine.public_url))
    result = run.trial.result if run.trial is not None else None
    agent_info = result.agent_info if result is not None else None
    timings: dict[str, float | None] = {**_phase_timings(result), "total": out.seconds}
    return meta.model_copy(
        update={
            "ids": {
                **meta.ids,
                "rollout": run.id,
                "group": run.request.group,
                "trial": result.trial_name if result else None,
                "trial_dir": str(trial_dir) if trial_dir else None,
            },
            "task": {
                "dataset": run.request.dataset,
                "name": run.task.name if run.task else run.request.task,
            },
            "harness": {
                "name": run.request.harness,
                "version": agent_info.version if agent_info else None,
                "dialect": run.dialect,
            },
            "sandbox": run.request.sandbox,
            "versions": _versions(),
            "ok": out.ok,
            "error": out.error.model_dump() if out.error else None,
            "reward": out.reward,
            "rewards": out.rewards,
            "reward_key": out.reward_key,
            "reward_provenance": reward_provenance(trial_dir) if trial_dir else None,
            "atif": out.atif.model_dump() if out.atif else None,
            "timings": timings,
        }
    )


def _phase_timings(result: Any) -> dict[str, float | None]:
    if result is None:
        return {}
    spans = {
        "booting": result.environment_setup,
        "agent_setup": result.agent_setup,
        "agent": result.agent_execution,
        "verifying": result.verifier,
    }
    return {
        name: round((span.finished_at - span.started_at).total_seconds(), 3)
        if span is not None and span.started_at and span.finished_at
        else None
        for name, span in spans.items()
    }


def _versions() -> dict[str, str | None]:
    def of(package: str) -> str | None:
        try:
            return version(package)
        except PackageNotFoundError:
            return None

    return {"harbor": of("harbor"), "workbench": of("harbor-workbench"), "litellm": of("litellm")}


def _row(run: _Run, out: RolloutResult) -> RolloutRow:
    return RolloutRow(
        id=run.id,
        created_at=time.time(),
        dataset=run.request.dataset,
        task=run.task.name if run.task else run.request.task,
        harness=run.request.harness,
        sandbox=run.request.sandbox,
        engine=run.request.engine.public_url,
        tier=out.tier,
        ok=out.ok,
        error_kind=out.error.kind if out.error else None,
        error_message=out.error.message if out.error else None,
        reward=out.reward,
        turns=out.turns,
        tokens=out.tokens,
        seconds=out.seconds,
        trial_dir=out.trial_dir,
    )
