"""Trainer-facing records built from a rollout document (either form).

`trace_entries` gives one record per live agent turn in the shape of TRL's loop-owning
`TraceEntry` (trl/experimental/async_grpo/openenv_harness.py, a `TypedDict(total=False)`):

    {"request":  {"messages": [...], "tools": [...] | None},
     "response": {"choices": [{"index": 0, "finish_reason": ...,
                               "message": {"role": "assistant", "content": ...,
                                           "reasoning_content": ..., "tool_calls": [...]}}]},
     "completion_token_ids": [...],      # the engine's sampled ids
     "per_token_logps": [...],           # their logprobs (null where the engine gave none)
     "prompt_token_ids": [...],          # extra key: the engine's exact prompt ids
     "rollout_id", "turn", "parent", "root", "reward"}   # extra keys: provenance

Tool calls are in OpenAI nested form. `request.tools` is the manifest the call sent upstream
(chat-completions form; None without one, and in documents written before manifests were
kept), so a trainer can re-render the prompt from `messages` + `tools`; `prompt_token_ids` stay
the exact ids. Turns of every agent root are exported (subagents too); aux and discarded turns
are not.

`sequence_records` gives one record per sequence: token ids, loss mask and logprobs (null where
the mask is 0), with the rollout's reward.
"""

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from capture.document import DocumentError, expand_document, tool_manifest
from capture.types import SCHEMA_ID


def trace_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    turns = _expanded(doc)["turns"]
    manifests = doc.get("tools") or []
    rollout_id = doc.get("ids", {}).get("rollout")
    out = []
    for t in turns:
        if t["discarded"] or t["role"] != "agent":
            continue
        message: dict[str, Any] = {"role": "assistant", "content": t["content"]}
        if t["reasoning"] is not None:
            message["reasoning_content"] = t["reasoning"]
        if t["tool_calls"]:
            message["tool_calls"] = t["tool_calls"]
        out.append(
            {
                "request": {
                    "messages": t["messages"],
                    "tools": tool_manifest(manifests, t.get("tools"), t["id"]),
                },
                "response": {
                    "choices": [
                        {"index": 0, "finish_reason": t["finish_reason"], "message": message}
                    ]
                },
                "completion_token_ids": t["completion_token_ids"],
                "per_token_logps": t["logprobs"],
                "prompt_token_ids": t["prompt_token_ids"],
                "rollout_id": rollout_id,
                "turn": t["id"],
                "parent": t["parent"],
                "root": t["root"],
                "reward": doc.get("reward"),
            }
        )
    return out


def sequence_records(doc: dict[str, Any]) -> list[dict[str, Any]]:
    sequences = _expanded(doc)["sequences"]
    rollout_id = doc.get("ids", {}).get("rollout")
    return [
        {
            "rollout_id": rollout_id,
            "leaf": s["leaf"],
            "node_ids": s["node_ids"],
            "token_ids": s["token_ids"],
            "loss_mask": s["loss_mask"],
            "logprobs": s["logprobs"],
            "reward": doc.get("reward"),
        }
        for s in sequences
    ]


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> int:
    """Write one JSON object per line (strict JSON: no NaN); returns the number written."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, allow_nan=False, ensure_ascii=False) + "\n")
            n += 1
    return n


def _expanded(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ID:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise DocumentError(f"not a {SCHEMA_ID!r} rollout document (schema: {found!r})")
    return expand_document(doc)
