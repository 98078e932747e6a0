"""Findings about a capture: FATAL (the data is not trainable), WARN (suspicious), INFO.

`check_turn` runs at ingest on one Turn; `check_rollout` runs on the whole graph when the
rollout document is built. Any FATAL finding makes the rollout `ok=False`.

Codes:
  FATAL  no_model_calls, logprobs_length_mismatch, token_ids_missing
  WARN   empty_completion, drift, single_call_agentic, continues_discarded
  INFO   sampling_neutralised, retries_discarded
"""

from typing import TYPE_CHECKING

from pydantic import BaseModel

from capture.turns import Turn
from capture.types import FindingLevel, Tier

if TYPE_CHECKING:  # the graph imports nothing from here; keep the import one-way at runtime
    from capture.graph import RolloutGraph


_DROPPED = "(dropped)"


class Finding(BaseModel):
    level: FindingLevel
    code: str
    message: str
    turn: int | None = None


def check_turn(turn: Turn, tier: Tier, index: int | None = None) -> list[Finding]:
    """Per-call checks, run at ingest. `index` is the turn's node index when known."""
    out: list[Finding] = []

    def add(level: FindingLevel, code: str, message: str) -> None:
        out.append(Finding(level=level, code=code, message=message, turn=index))

    n_ids = len(turn.completion_ids)
    sampled = bool(turn.content or turn.tool_calls or turn.reasoning)  # visible output
    if tier == "tokens" and (len(turn.prompt_ids) == 0 or (n_ids == 0 and sampled)):
        missing = "prompt" if len(turn.prompt_ids) == 0 else "completion"
        add(
            "FATAL",
            "token_ids_missing",
            f"the engine is at tier `tokens` but returned no {missing} token ids; check that it "
            "honours `return_token_ids` (vLLM >= 0.10.2)",
        )
    if n_ids and turn.completion_logprobs is None and tier == "tokens":
        add(
            "FATAL",
            "logprobs_length_mismatch",
            f"{n_ids} completion ids but no logprobs at tier `tokens`; request `logprobs: true`",
        )
    elif turn.completion_logprobs is not None and len(turn.completion_logprobs) != n_ids:
        add(
            "FATAL",
            "logprobs_length_mismatch",
            f"{n_ids} completion ids but {len(turn.completion_logprobs)} logprobs: the two "
            "must align token for token",
        )
    for key, ids in (
        ("prompt_tokens", turn.prompt_ids),
        ("completion_tokens", turn.completion_ids),
    ):
        counted = (turn.usage or {}).get(key)
        if tier == "tokens" and len(ids) and isinstance(counted, int) and counted != len(ids):
            add(
                "FATAL",
                "usage_mismatch",
                f"the engine returned {len(ids)} {key.split('_')[0]} ids but counted {counted} "
                "in usage: the ids are not the whole sequence (WIRE.md §2.2)",
            )
    if n_ids == 0 and not sampled:
        add(
            "WARN",
            "empty_completion",
            f"the call sampled nothing (finish_reason={turn.finish_reason!r})",
        )
    requested, applied = turn.sampling_requested, turn.sampling_applied
    changed = sorted(k for k in requested if applied.get(k, _DROPPED) != requested[k])
    if changed:
        pairs = ", ".join(f"{k}: {requested[k]!r} -> {applied.get(k, _DROPPED)!r}" for k in changed)
        add(
            "INFO",
            "sampling_neutralised",
            "sampling knobs changed before the engine call (no-op values so logprobs match "
            f"the sampler, or a clamp): {pairs}",
        )
    return out


def check_rollout(graph: "RolloutGraph", *, agentic: bool, tier: Tier) -> list[Finding]:
    """Whole-rollout checks. `agentic`: the harness is expected to make several calls."""
    out: list[Finding] = []
    if len(graph) == 0:
        where = "the engine tier is `text`; " if tier == "text" else ""
        out.append(
            Finding(
                level="FATAL",
                code="no_model_calls",
                message=f"{where}the harness made no model calls through the capture proxy; "
                "check that it was pointed at the proxy URL with the session id as its key",
            )
        )
        return out
    for i in range(len(graph)):
        node = graph.node(i)
        if node.drift is not None:
            d = node.drift
            out.append(
                Finding(
                    level="WARN",
                    code="drift",
                    message=f"prompt re-sends turn {d.turn}'s sampled tokens differently from "
                    f"position {d.index} (token {d.token}, sampled {d.expected}): "
                    "retokenisation drift splits the conversation",
                    turn=i,
                )
            )
        if node.attached_to_discarded:
            out.append(
                Finding(
                    level="WARN",
                    code="continues_discarded",
                    message=f"turn extends turn {node.parent}, which an identical-prompt retry "
                    "had already superseded; it is discarded with it",
                    turn=i,
                )
            )
    if agentic and len(graph) == 1:
        out.append(
            Finding(
                level="WARN",
                code="single_call_agentic",
                message="an agentic harness made only one model call: the agent likely failed "
                "to parse the answer or to run a tool",
                turn=0,
            )
        )
    discarded = graph.counters()["discarded"]
    if discarded:
        out.append(
            Finding(
                level="INFO",
                code="retries_discarded",
                message=f"{discarded} turn(s) superseded by identical-prompt retries were "
                "discarded (kept in the document, not in any sequence)",
            )
        )
    return out
