"""Golden runs: Harbor's oracle agent (each task's own solution) in a sandbox, no model and no
capture. A task below 1.0 here is broken infrastructure, not a weak policy: run this first."""

import asyncio
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from workbench.datasets import DatasetResolver
from workbench.failures import Failure, RolloutError, trial_error
from workbench.harbor_trial import SlotGate, TrialRun, build_trial_config, preflight
from workbench.harnesses import get_harness
from workbench.rewards import select_reward
from workbench.rollout import resolve_task
from workbench.sandboxes import get_sandbox
from workbench.store import Store

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 600.0
TEST_LOG = Path("verifier") / "test-stdout.txt"


class OracleResult(BaseModel):
    """One task run by the oracle. `test_log_tail` is the end of the verifier's stdout."""

    task: str
    reward: float | None = None
    rewards: dict[str, float | int] | None = None
    error: RolloutError | None = None
    trial_dir: str | None = None
    test_log_tail: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and self.reward == 1.0


async def run_oracle(
    dataset: str,
    task: str,
    sandbox: str,
    store: Store,
    datasets: DatasetResolver,
    *,
    sandbox_slots: SlotGate | None = None,
    sandbox_root: Path | None = None,
    timeout_s: float | None = None,
    log_lines: int = 20,
) -> OracleResult:
    """Run the oracle on one task; never raises."""
    started = time.monotonic()
    error: RolloutError | None = None
    trial: TrialRun | None = None
    try:
        info = await asyncio.to_thread(resolve_task, datasets, dataset, task)
        task = info.name
        sandbox_info = get_sandbox(sandbox)
        if not sandbox_info.usable:
            raise Failure("sandbox_unavailable", f"sandbox {sandbox!r}: {sandbox_info.reason}")
        job = "golden-" + datetime.now(UTC).strftime("%Y-%m-%d")
        config = build_trial_config(
            task=info,
            harness=get_harness("oracle"),
            sandbox=sandbox_info,
            trials_dir=store.jobs_dir / job,
            connection=None,
            sandbox_root=sandbox_root,
        )
        preflight(config)
        trial = TrialRun(
            config,
            deadline=time.monotonic() + (timeout_s or DEFAULT_TIMEOUT_S),
            sandbox_slots=sandbox_slots,
        )
        await trial.run()
    except Failure as failure:
        error = failure.error
    except Exception as exc:
        log.exception("oracle run on %s failed internally", task)
        error = RolloutError(kind="internal", message=f"{type(exc).__name__}: {exc}")

    result = trial.result if trial is not None else None
    rewards = result.verifier_result.rewards if result and result.verifier_result else None
    selection = select_reward(rewards, None)
    if error is None and result is not None:
        error = trial_error(result)
    if error is None and rewards is None:
        error = RolloutError(kind="verifier_failed", message="the verifier produced no rewards")
    if error is None and selection.problem is not None:
        error = RolloutError(kind="reward_ambiguous", message=selection.problem)
    trial_dir = trial.trial.paths.trial_dir if trial is not None and trial.trial else None
    return OracleResult(
        task=task,
        reward=selection.reward,
        rewards=dict(rewards) if rewards is not None else None,
        error=error,
        trial_dir=str(trial_dir) if trial_dir else None,
        test_log_tail=_tail(trial_dir / TEST_LOG, log_lines) if trial_dir else None,
        seconds=round(time.monotonic() - started, 3),
    )


def _tail(path: Path, lines: int) -> str | None:
    if not path.is_file():
        return None
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
