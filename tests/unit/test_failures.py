"""Harbor's recorded exception -> one typed error kind (DESIGN.md §8)."""

from datetime import UTC, datetime, timedelta

import pytest
from harbor.models.trial.result import ExceptionInfo, TimingInfo, TrialResult

from workbench.failures import trial_error

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _span(start_s: float, end_s: float) -> TimingInfo:
    return TimingInfo(
        started_at=T0 + timedelta(seconds=start_s), finished_at=T0 + timedelta(seconds=end_s)
    )


def _result(exception_type: str, at_s: float, **spans: TimingInfo) -> TrialResult:
    info = ExceptionInfo(
        exception_type=exception_type,
        exception_message="boom",
        exception_traceback="",
        occurred_at=T0 + timedelta(seconds=at_s),
    )
    return TrialResult.model_construct(exception_info=info, **spans)


FULL = dict(
    environment_setup=_span(0, 1),
    agent_setup=_span(1, 2),
    agent_execution=_span(2, 5),
    verifier=_span(6, 7),
)


def test_no_exception_is_no_error():
    assert trial_error(TrialResult.model_construct(exception_info=None)) is None


@pytest.mark.parametrize(
    ("exception_type", "kind"),
    [
        ("AgentTimeoutError", "timeout"),
        ("EnvironmentStartTimeoutError", "timeout"),
        ("RewardFileNotFoundError", "verifier_failed"),
        ("HealthcheckError", "sandbox_failed"),
        ("GKEExecStreamClosedError", "sandbox_failed"),  # in the agent phase: still the sandbox's
        ("SSHAccessError", "sandbox_failed"),
        ("CancelledError", "cancelled"),
    ],
)
def test_known_harbor_exceptions_map_by_name(exception_type, kind):
    error = trial_error(_result(exception_type, 3, **FULL))
    assert error.kind == kind and error.message == f"{exception_type}: boom"


def test_agent_error_of_a_graded_trial_is_agent_failed_not_verifier_failed():
    # The verifier ran after the agent failed (Harbor grades it): the time decides, not presence.
    assert trial_error(_result("BadRequestError", 3, **FULL)).kind == "agent_failed"


@pytest.mark.parametrize(
    ("at_s", "spans", "kind"),
    [
        (0.5, dict(environment_setup=_span(0, 1)), "sandbox_failed"),
        (1.5, dict(environment_setup=_span(0, 1), agent_setup=_span(1, 2)), "agent_setup_failed"),
        (6.5, FULL, "verifier_failed"),
    ],
)
def test_other_exceptions_map_by_the_phase_they_happened_in(at_s, spans, kind):
    assert trial_error(_result("RuntimeError", at_s, **spans)).kind == kind
