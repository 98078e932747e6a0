"""Request shaping: turn a client's chat body into the body the engine must see.

Every tier gets the changes that keep the engine from rejecting the call: `model` rewritten to the
served name, `stream: false`, empty `tools` and orphan `tool_choice` dropped, `max_tokens` clamped,
system/developer messages merged into one leading system message, `reasoning_content` renamed to
`reasoning`, `include_reasoning: false` removed (it nulls ids and logprobs, WIRE.md §1.2).

Tier `tokens` also forces the capture fields (WIRE.md §1.1) and sets the sampling knobs that would
make the sampled distribution differ from the policy's (top_p, top_k, min_p, penalties, n) to
no-op values; what the client asked for and what was applied are both kept on the turn. Tiers
`logprobs` and `text` forward the harness's knobs unchanged (an eval run samples as asked).
"""

import reprlib
from dataclasses import dataclass, field
from typing import Any

from capture.types import Tier

# Knob -> its no-op value. temperature and seed are the policy's own: kept as requested.
NO_OP_SAMPLING: dict[str, Any] = {
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "n": 1,
}
RECORDED_KNOBS = (*NO_OP_SAMPLING, "temperature", "seed", "max_tokens", "max_completion_tokens")
SYSTEM_ROLES = ("system", "developer")


@dataclass
class Shaped:
    """A shaped upstream body and the sampling knobs before and after shaping."""

    body: dict[str, Any]
    sampling_requested: dict[str, Any] = field(default_factory=dict)
    sampling_applied: dict[str, Any] = field(default_factory=dict)


def shape_chat_body(
    body: dict[str, Any],
    *,
    tier: Tier,
    served_model: str,
    max_tokens_ceiling: int,
    max_model_len: int | None = None,
) -> Shaped:
    """Shape a chat-completions body for the engine. The input is not modified."""
    out = dict(body)
    requested = {k: out[k] for k in RECORDED_KNOBS if k in out}
    out["model"] = served_model
    out["stream"] = False
    out.pop("stream_options", None)  # only allowed with stream: true (400 otherwise)
    if out.get("include_reasoning") is False:
        del out["include_reasoning"]
    drop_empty_tools(out)
    clamp_max_tokens(out, min(max_tokens_ceiling, max_model_len or max_tokens_ceiling))
    if isinstance(out.get("messages"), list):
        out["messages"] = [rename_reasoning(m) for m in merge_system_messages(out["messages"])]
    if tier == "tokens":
        force_capture_fields(out)
        out.update(NO_OP_SAMPLING)
        # Unset, vLLM takes the model's generation_config default (Qwen3: 0.6) and the turn would
        # record no temperature: pin it so `sampling_applied` says what the logprobs mean.
        out.setdefault("temperature", 1.0)
    elif tier == "logprobs":
        out["logprobs"] = True
        out.setdefault("top_logprobs", 0)
        out["return_token_ids"] = True  # harmless when ignored; used when present
    applied = {k: out[k] for k in RECORDED_KNOBS if k in out}
    return Shaped(out, requested, applied)


def refusal(body: dict[str, Any]) -> str | None:
    """Why a (translated) chat body cannot be captured as asked, or None. Checked before any
    engine call so the client gets a 400 instead of an answer that silently differs."""
    n = body.get("n")
    if n is not None and n != 1:
        got = reprlib.repr(n)
        return f"n must be 1, got {got}: the capture proxy records one sample per call"
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        positive = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        if value is not None and not positive:
            got = reprlib.repr(value)
            return f"{key} must be a positive integer, got {got} (the engine refuses it)"
    return None


def force_capture_fields(body: dict[str, Any]) -> None:
    """Ask for prompt ids, sampled ids and aligned logprobs (WIRE.md §1.1)."""
    client_wants_logprobs = body.get("logprobs") is True
    body["return_token_ids"] = True
    body["logprobs"] = True
    if not client_wants_logprobs or not isinstance(body.get("top_logprobs"), int):
        body["top_logprobs"] = 0
    # Lossless "token_id:N" strings, unless the client reads the logprob strings itself.
    if not client_wants_logprobs:
        body["return_tokens_as_token_ids"] = True
    body["include_reasoning"] = True


def drop_empty_tools(body: dict[str, Any]) -> None:
    """`tools: []` is a 400 in vLLM ≥ PR #39780; `tool_choice` without tools is a 400 too."""
    if "tools" in body and not body["tools"]:
        del body["tools"]
    if "tools" not in body:
        body.pop("tool_choice", None)
        body.pop("parallel_tool_calls", None)


def clamp_max_tokens(body: dict[str, Any], ceiling: int) -> None:
    """Bound the completion length (vLLM answers 400 for max_tokens > max_model_len)."""
    present = [k for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None]
    for key in present:
        value = body[key]
        if isinstance(value, int) and not isinstance(value, bool):
            body[key] = max(1, min(value, ceiling))
    if not present:
        body["max_tokens"] = ceiling


def merge_system_messages(messages: list[Any]) -> list[Any]:
    """One leading system message holding every system/developer text, in order.

    Many chat templates reject a system message that is not first. Moving later system text to
    the top is a policy choice (WIRE.md §6.0 step 4); a single leading system message is kept as is.
    """
    systems = [m for m in messages if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES]
    if not systems or (len(systems) == 1 and messages[0] is systems[0] and _is_system(systems[0])):
        return messages
    text = "\n\n".join(t for t in (content_text(m.get("content")) for m in systems) if t)
    rest = [m for m in messages if not (isinstance(m, dict) and m.get("role") in SYSTEM_ROLES)]
    return [{"role": "system", "content": text}, *rest]


def _is_system(message: dict[str, Any]) -> bool:
    return message.get("role") == "system"


def content_text(content: Any) -> str:
    """Text of a chat `content` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def rename_reasoning(message: Any) -> Any:
    """vLLM ≥ 0.11 reads `reasoning`; older clients send `reasoning_content` (WIRE.md §1.9)."""
    if not isinstance(message, dict) or "reasoning_content" not in message:
        return message
    renamed = dict(message)
    legacy = renamed.pop("reasoning_content")
    renamed.setdefault("reasoning", legacy)
    return renamed
