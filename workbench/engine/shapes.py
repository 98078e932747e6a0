"""vLLM's response bodies and SSE chunks (WIRE.md §2), built from a finished generation."""

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from workbench.engine.generation import Completion, TokenLogprob
from workbench.engine.tokenizer import EngineTokenizer
from workbench.engine.toolparse import ParsedOutput

LOGPROB_FLOOR = -9999.0  # vLLM clamps -inf (masked tokens) to this in chat


@dataclass
class ChatResult:
    """Everything a chat answer is built from, streamed or not."""

    model: str
    prompt_ids: list[int]
    completion: Completion
    parsed: ParsedOutput
    finish_reason: str
    return_ids: bool  # return_token_ids honoured
    as_ids: bool  # logprob names as "token_id:N"
    top_logprobs: int | None  # None: logprobs off
    include_reasoning: bool
    reasoning_tokens: int = 0
    id: str = ""
    created: int = 0

    def __post_init__(self) -> None:
        self.id = self.id or f"chatcmpl-{uuid.uuid4().hex}"
        self.created = self.created or int(time.time())


def usage(prompt_tokens: int, completion_tokens: int, reasoning_tokens: int | None = None) -> dict:
    """vLLM's UsageInfo; `reasoning_tokens` is reported when a reasoning parser is on (chat)."""
    details = None if reasoning_tokens is None else {"reasoning_tokens": reasoning_tokens}
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "completion_tokens_details": details,
    }


def usage_chunk(
    head: dict, prompt_tokens: int, completion_tokens: int, reasoning_tokens: int | None = None
) -> dict:
    """The final `choices: []` chunk; vLLM serialises it without nulls."""
    counts = usage(prompt_tokens, completion_tokens, reasoning_tokens)
    return {**head, "choices": [], "usage": {k: v for k, v in counts.items() if v is not None}}


def _name(tok: EngineTokenizer, token_id: int, as_ids: bool) -> str:
    return f"token_id:{token_id}" if as_ids else tok.token_str(token_id)


def chat_logprob_entries(
    tok: EngineTokenizer, ids: list[int], lps: list[TokenLogprob], k: int, as_ids: bool
) -> list[dict]:
    """`logprobs.content` entries: the chosen token first in `top_logprobs`, then the top-k."""
    limit = None if k == -1 else k
    entries = []
    for token_id, lp in zip(ids, lps, strict=True):
        top = []
        for alt, value in lp.top[:limit]:
            name = _name(tok, alt, as_ids)
            top.append(
                {"token": name, "logprob": max(value, LOGPROB_FLOOR), "bytes": list(name.encode())}
            )
        entries.append(
            {
                "token": _name(tok, token_id, as_ids),
                "logprob": max(lp.logprob, LOGPROB_FLOOR),
                "bytes": list(tok.token_str(token_id).encode()),
                "top_logprobs": top,
            }
        )
    return entries


def completion_logprobs(
    tok: EngineTokenizer, c: Completion, k: int, as_ids: bool, offset: int = 0
) -> dict:
    """Completions-style logprobs: the chosen token plus the top-k in one dict per position."""
    limit = None if k == -1 else k + 1
    starts = [offset + s for s in accumulate((len(p) for p in c.pieces), initial=0)][:-1]
    assert c.logprobs is not None
    return {
        "text_offset": starts,
        "token_logprobs": [lp.logprob for lp in c.logprobs],
        "tokens": [_name(tok, i, as_ids) for i in c.token_ids],
        "top_logprobs": [
            {_name(tok, alt, as_ids): value for alt, value in lp.top[:limit]} for lp in c.logprobs
        ],
    }


def chat_message(r: ChatResult) -> dict:
    message = {
        "role": "assistant",
        "content": r.parsed.content,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
    }
    if r.parsed.tool_calls:
        message["tool_calls"] = r.parsed.tool_calls
    message["reasoning"] = r.parsed.reasoning if r.include_reasoning else None
    return message


def chat_json(tok: EngineTokenizer, r: ChatResult) -> dict:
    c = r.completion
    metadata = r.include_reasoning  # vLLM nulls ids and logprobs when include_reasoning=false
    logprobs = None
    if r.top_logprobs is not None and metadata and c.logprobs is not None:
        logprobs = {
            "content": chat_logprob_entries(tok, c.token_ids, c.logprobs, r.top_logprobs, r.as_ids)
        }
    choice = {
        "index": 0,
        "message": chat_message(r),
        "logprobs": logprobs,
        "finish_reason": r.finish_reason,
        "stop_reason": c.stop_reason,
        "token_ids": c.token_ids if r.return_ids and metadata else None,
        "routed_experts": None,
        "weight_versions": None,
    }
    return {
        "id": r.id,
        "object": "chat.completion",
        "created": r.created,
        "model": r.model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(len(r.prompt_ids), len(c.token_ids), r.reasoning_tokens),
        "prompt_logprobs": None,
        "prompt_token_ids": r.prompt_ids if r.return_ids else None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }


def _overlap(span: tuple[int, int] | None, start: int, end: int, text: str) -> str:
    if span is None:
        return ""
    lo, hi = max(span[0], start), min(span[1], end)
    return text[lo:hi] if lo < hi else ""


def _token_deltas(r: ChatResult) -> Iterator[dict]:
    """The `delta` of each completion token: its share of reasoning, content and tool calls."""
    c, parsed = r.completion, r.parsed
    calls = list(zip(parsed.tool_call_ends, parsed.tool_calls, strict=True))
    sent = 0
    start = 0
    for i, piece in enumerate(c.pieces):
        end = start + len(piece)
        delta: dict = {}
        reasoning = _overlap(parsed.reasoning_span, start, end, c.text)
        if reasoning and r.include_reasoning:
            delta["reasoning"] = reasoning
        content = _overlap(parsed.content_span, start, end, c.text)
        if content:
            delta["content"] = content
        last = i == len(c.pieces) - 1
        ready = []
        while sent < len(calls) and (calls[sent][0] <= end or last):
            ready.append({**calls[sent][1], "index": sent})
            sent += 1
        if ready:
            delta["tool_calls"] = ready
        yield delta
        start = end


def chat_chunks(
    tok: EngineTokenizer, r: ChatResult, *, include_usage: bool, continuous_usage: bool
) -> Iterator[dict]:
    """vLLM's chunk sequence: role chunk (prompt ids), one chunk per token, optional usage."""
    head = {"id": r.id, "object": "chat.completion.chunk", "created": r.created, "model": r.model}
    c = r.completion
    metadata = r.include_reasoning
    first = {
        **head,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    }
    if r.return_ids:
        first["prompt_token_ids"] = r.prompt_ids
        first["prompt_text"] = None
    if continuous_usage:
        first["usage"] = usage(len(r.prompt_ids), 0)
    yield first
    entries = None
    if r.top_logprobs is not None and metadata and c.logprobs is not None:
        entries = chat_logprob_entries(tok, c.token_ids, c.logprobs, r.top_logprobs, r.as_ids)
    n = len(c.token_ids)
    for i, delta in enumerate(_token_deltas(r)):
        last = i == n - 1
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": {"content": [entries[i]]} if entries is not None else None,
            "finish_reason": r.finish_reason if last else None,
        }
        if last:
            choice["stop_reason"] = c.stop_reason
        if r.return_ids and metadata:
            choice["token_ids"] = [c.token_ids[i]]
        chunk = {**head, "choices": [choice], "kv_transfer_params": None}
        if continuous_usage:
            chunk["usage"] = usage(len(r.prompt_ids), i + 1)
        yield chunk
    if include_usage:
        yield usage_chunk(head, len(r.prompt_ids), n, r.reasoning_tokens)


@dataclass
class CompletionChoice:
    prompt_ids: list[int]
    completion: Completion


def _totals(choices: list[CompletionChoice]) -> tuple[int, int]:
    prompt = sum(len(ch.prompt_ids) for ch in choices)
    return prompt, sum(len(ch.completion.token_ids) for ch in choices)


def completion_json(
    tok: EngineTokenizer,
    model: str,
    choices: list[CompletionChoice],
    *,
    id: str,
    return_ids: bool,
    as_ids: bool,
    logprobs: int | None,
) -> dict:
    out = []
    for index, ch in enumerate(choices):
        c = ch.completion
        out.append(
            {
                "index": index,
                "text": c.text,
                "logprobs": completion_logprobs(tok, c, logprobs, as_ids)
                if logprobs is not None
                else None,
                "finish_reason": c.finish_reason,
                "stop_reason": c.stop_reason,
                "token_ids": c.token_ids if return_ids else None,
                "prompt_logprobs": None,
                "prompt_token_ids": ch.prompt_ids if return_ids else None,
                "routed_experts": None,
                "weight_versions": None,
            }
        )
    return {
        "id": id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": out,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(*_totals(choices)),
        "kv_transfer_params": None,
    }


def completion_chunks(
    tok: EngineTokenizer,
    model: str,
    choices: list[CompletionChoice],
    *,
    id: str,
    return_ids: bool,
    as_ids: bool,
    logprobs: int | None,
    include_usage: bool,
) -> Iterator[dict]:
    """One chunk per token per choice; a choice's first chunk carries its prompt ids."""
    head = {
        "id": id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
    }
    for index, ch in enumerate(choices):
        c = ch.completion
        offset = 0
        for i, piece in enumerate(c.pieces):
            last = i == len(c.pieces) - 1
            one = Completion(
                [c.token_ids[i]], [piece], piece, c.logprobs and [c.logprobs[i]], "", None
            )
            choice = {
                "index": index,
                "text": piece,
                "logprobs": completion_logprobs(tok, one, logprobs, as_ids, offset)
                if logprobs is not None
                else None,
                "finish_reason": c.finish_reason if last else None,
                "stop_reason": c.stop_reason if last else None,
            }
            if return_ids:
                choice["token_ids"] = [c.token_ids[i]]
                if i == 0:
                    choice["prompt_token_ids"] = ch.prompt_ids
            offset += len(piece)
            yield {**head, "choices": [choice]}
    if include_usage:
        yield usage_chunk(head, *_totals(choices))
