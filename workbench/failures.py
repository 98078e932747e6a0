"""The failure model of a rollout (DESIGN.md §8): one typed error kind per way a rollout can be
unusable, and the mapping from Harbor's recorded `exception_info` to those kinds."""

import traceback
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from harbor.models.trial.result import TimingInfo, TrialResult

ErrorKind = Literal[
    "engine_unreachable",
    "engine_not_trainable",
    "sandbox_unavailable",
    "sandbox_failed",
    "agent_setup_failed",
    "agent_failed",
    "timeout",
    "verifier_failed",
    "no_model_calls",
    "capture_invalid",
    "reward_ambiguous",
    "cancelled",
    "invalid_request",  # the caller's mistake (unknown task, dataset, harness, ...): fix the request
    "internal",  # our bug
]

# Harbor exception class names -> our kinds. Anything else is classified by the phase the trial
# had reached (Harbor records only the class name, `error_policy.py` keys on it the same way).
EXCEPTION_KINDS: dict[str, ErrorKind] = {
    "AgentTimeoutError": "timeout",
    "AgentSetupTimeoutError": "timeout",
    "EnvironmentStartTimeoutError": "timeout",
    "VerifierTimeoutError": "timeout",
    "CancelledError": "cancelled",
    "RewardFileNotFoundError": "verifier_failed",
    "RewardFileEmptyError": "verifier_failed",
    "VerifierOutputParseError": "verifier_failed",
    "AddTestsDirError": "verifier_failed",
    "DownloadVerifierDirError": "verifier_failed",
    "HealthcheckError": "sandbox_failed",
    "SandboxBuildFailedError": "sandbox_failed",
    "SandboxLikelyOutOfMemoryError": "sandbox_failed",
    "MemoryLimitExceededError": "sandbox_failed",
    # Harbor's infrastructure group (the sandbox's transport broke, not the agent): whatever the
    # phase, the reward is not the agent's.
    "GKEExecStreamClosedError": "sandbox_failed",
    "GKEPodNotFoundError": "sandbox_failed",
    "SSHAccessError": "sandbox_failed",
    "MissingExtraError": "sandbox_unavailable",
}


class RolloutError(BaseModel):
    kind: ErrorKind
    message: str


class Failure(Exception):
    """A typed failure found around the trial (before it, or by our deadline/cancel)."""

    def __init__(self, kind: ErrorKind, message: str):
        super().__init__(message)
        self.error = RolloutError(kind=kind, message=message)


def trial_error(result: "TrialResult") -> RolloutError | None:
    """The error Harbor recorded for a trial, typed; None when it recorded none."""
    info = result.exception_info
    if info is None:
        return None
    message = f"{info.exception_type}: {info.exception_message}".strip()
    kind = EXCEPTION_KINDS.get(info.exception_type) or _phase_kind(result, info.occurred_at)
    return RolloutError(kind=kind, message=message)


def _phase_kind(result: "TrialResult", at: datetime) -> ErrorKind:
    """Classify by the phase running when the exception was recorded (a graded trial has
    verifier timings even when the agent failed, so presence alone would mislead)."""

    def started(span: "TimingInfo | None") -> bool:
        return span is not None and span.started_at is not None and span.started_at <= at

    if started(result.verifier):
        return "verifier_failed"
    if started(result.agent_execution):
        return "agent_failed"
    if started(result.agent_setup):
        return "agent_setup_failed"
    return "sandbox_failed"


def describe(exc: BaseException) -> str:
    text = str(exc).strip() or "".join(traceback.format_exception_only(exc)).strip()
    return f"{type(exc).__name__}: {text}"
