"""Engine answers shaped like vLLM's non-streaming chat completion (WIRE.md §2.1)."""

import json
from typing import Any


def engine_reply(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    calls: list[tuple[str, str, str]] = (),
    finish_reason: str | None = None,
    stop_reason: int | str | None = None,
    reply_id: str = "chatcmpl-abc123",
) -> dict[str, Any]:
    """A chat completion; `calls` are (id, name, arguments string) exactly as the engine sent."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "reasoning": reasoning}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    completion = [11, 12, 13, 14]
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": 1764500000,
        "model": "workbench-ref",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": {
                    "content": [{"token": f"token_id:{t}", "logprob": -0.5} for t in completion]
                },
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
                "stop_reason": stop_reason,
                "token_ids": completion,
            }
        ],
        "usage": {
            "prompt_tokens": 30,
            "completion_tokens": len(completion),
            "total_tokens": 30 + len(completion),
            "completion_tokens_details": {"reasoning_tokens": 1} if reasoning else None,
        },
        "prompt_token_ids": list(range(30)),
    }


def engine_message(reply: dict[str, Any]) -> dict[str, Any]:
    """The assistant message exactly as the engine answered it (what a replay must reproduce)."""
    message = reply["choices"][0]["message"]
    out = {"role": "assistant", "content": message["content"]}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    if message.get("reasoning") is not None:
        out["reasoning"] = message["reasoning"]
    return out


def frames(stream: Any) -> list[tuple[str | None, dict[str, Any]]]:
    """(event name, JSON data) of each SSE frame; fails on a frame that is not JSON."""
    out = []
    for frame in "".join(stream).split("\n\n"):
        if not frame:
            continue
        name = None
        data = []
        for line in frame.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
            else:
                raise AssertionError(f"unexpected SSE line {line!r}")
        out.append((name, json.loads("\n".join(data))))
    return out
