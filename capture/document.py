"""The rollout document: the versioned JSON contract of one rollout (DESIGN.md §7).

Two forms of the same graph:
- `full` (the default download): every turn carries its whole `prompt_token_ids` and
  `messages`, and every sequence its `token_ids`, `loss_mask` and `logprobs`.
- `compact`: a turn carries `parent`, `prompt_delta_token_ids` (the tokens after its parent's
  prompt+completion) and `messages_delta` after `messages_inherited` of its parent's
  messages; sequences carry node ids only. Its size is linear in unique tokens.

Both forms keep each distinct tool manifest once, in the document's `tools` table; a turn's
`tools` is its manifest's index there (null: the request had none).

JSON has no NaN or infinity: a non-finite logprob is written as null. Sequence logprobs are null
wherever the loss mask is 0.

`ok` is computed here, not trusted: it is False whenever a FATAL finding stands (a graph with
zero turns always gets the FATAL `no_model_calls`). Without a verdict from the workbench
(`meta.ok is None`, e.g. the proxy's document of a bare session) `ok` means "usable capture":
at least one trainable turn (live, agent role, tier `tokens`, sampled something).
"""

import json
import math
from pathlib import Path
from typing import Any, Literal

import jsonschema
import numpy as np
from pydantic import BaseModel, Field

from capture.graph import RolloutGraph, Sequence
from capture.turns import Turn
from capture.types import SCHEMA_ID, Dialect, LogprobsMode, Tier
from capture.validate import Finding

SCHEMA_PATH = Path(__file__).parent / "schemas" / "rollout-1.json"

Form = Literal["full", "compact"]


class DocumentError(ValueError):
    """A document that cannot be turned back into a graph (corrupt, edited, or another schema)."""


class TaskMeta(BaseModel):
    dataset: str | None = None
    name: str | None = None


class HarnessMeta(BaseModel):
    name: str | None = None
    version: str | None = None
    dialect: Dialect | None = None


class EngineMeta(BaseModel):
    url: str | None = None  # never with credentials
    model: str | None = None  # the served model name
    tier: Tier | None = None
    logprobs_mode: LogprobsMode | None = None
    version: str | None = None  # the engine's GET /version (e.g. vLLM's release)


class ErrorMeta(BaseModel):
    kind: str
    message: str


class DocumentMeta(BaseModel):
    """What the builder of a document knows beyond the graph. Every field is optional."""

    ids: dict[str, str | None] = Field(default_factory=dict)  # session, rollout, trial, ...
    task: TaskMeta = Field(default_factory=TaskMeta)
    harness: HarnessMeta = Field(default_factory=HarnessMeta)
    sandbox: str | None = None
    engine: EngineMeta = Field(default_factory=EngineMeta)
    versions: dict[str, str | None] = Field(default_factory=dict)
    ok: bool | None = None  # the workbench's verdict; None = judge the capture alone
    error: ErrorMeta | None = None
    reward: float | None = None  # None = never graded (never 0)
    rewards: dict[str, Any] | None = None  # verbatim from the verifier
    reward_key: str | None = None
    reward_provenance: str | None = None
    atif: dict[str, Any] | None = None
    timings: dict[str, float | None] = Field(default_factory=dict)  # seconds per phase
    labels: dict[str, str] = Field(default_factory=dict)


# ---- build ------------------------------------------------------------------------------------


def build_document(
    graph: RolloutGraph,
    findings: list[Finding],
    meta: DocumentMeta | None = None,
    *,
    compact: bool = False,
) -> dict[str, Any]:
    """The rollout document of `graph` (JSON-ready). `findings` are recorded verbatim, plus
    `no_model_calls` when the graph is empty and nobody reported it yet."""
    # model_copy(update=...) does not validate: sub-objects may arrive as plain dicts.
    meta = DocumentMeta.model_validate(dict(meta or DocumentMeta()))
    findings = list(findings)
    if len(graph) == 0 and not any(f.code == "no_model_calls" for f in findings):
        findings.append(
            Finding(
                level="FATAL",
                code="no_model_calls",
                message="no model call was captured in this session",
            )
        )
    fatal = [f for f in findings if f.level == "FATAL"]
    trainable = sum(_trainable(graph, i) for i in range(len(graph)))
    # Never ok without a trainable turn or with a FATAL finding, whatever the caller says (§8).
    ok = meta.ok is not False and trainable > 0 and not fatal
    error = meta.error
    if not ok and error is None and fatal:
        kind = "no_model_calls" if fatal[0].code == "no_model_calls" else "capture_invalid"
        error = ErrorMeta(kind=kind, message=f"{fatal[0].code}: {fatal[0].message}")
    elif not ok and error is None and not trainable:
        error = ErrorMeta(
            kind="capture_invalid",
            message="no trainable turn: none is a live agent call at tier `tokens` that "
            "sampled tokens",
        )

    sequences = graph.sequences()
    return {
        "schema": SCHEMA_ID,
        "form": "compact" if compact else "full",
        **meta.model_dump(mode="json", exclude={"ok", "error"}),
        "ok": ok,
        "error": error.model_dump() if error else None,
        "counters": {
            **graph.counters(),
            "sequences": len(sequences),
            "trainable_turns": trainable,
        },
        "tools": graph.tool_manifests(),
        "turns": [_turn_record(graph, i, compact) for i in range(len(graph))],
        "sequences": [_sequence_record(s, compact) for s in sequences],
        "findings": [f.model_dump() for f in findings],
    }


def _trainable(graph: RolloutGraph, index: int) -> bool:
    node = graph.node(index)
    return (
        not node.discarded
        and graph.role(index) == "agent"
        and node.meta["tier"] == "tokens"
        and node.completion_len > 0
    )


def _floats(values: np.ndarray | None) -> list[float | None] | None:
    if values is None:
        return None
    return [v if math.isfinite(v) else None for v in values.tolist()]


def _turn_record(graph: RolloutGraph, index: int, compact: bool) -> dict[str, Any]:
    node = graph.node(index)
    meta = node.meta
    record: dict[str, Any] = {
        "id": index,
        "parent": node.parent,
        "root": node.root,
        "depth": node.depth,
        "role": node.role,
        "aux": node.demoted,
        "discarded": node.discarded,
        "drift": None
        if node.drift is None
        else {
            "turn": node.drift.turn,
            "index": node.drift.index,
            "token": node.drift.token,
            "expected": node.drift.expected,
        },
        "dialect": meta["dialect"],
        "route": meta["route"],
        "tier": meta["tier"],
        "engine": meta["engine"],
        "model": meta["model"],
        "client_stream": meta["client_stream"],
        "retry_of": meta["retry_of"],
        "prompt_len": node.prompt_len,
    }
    if compact:
        record["prompt_delta_token_ids"] = graph.prompt_delta(index).tolist()
        delta = graph.messages(index)[node.messages_inherited :]
        record["messages_inherited"] = node.messages_inherited
        record["messages_delta"] = delta
    else:
        record["prompt_token_ids"] = graph.prompt_ids(index).tolist()
        record["messages"] = graph.messages(index)
    record.update(
        {
            "completion_token_ids": graph.completion_ids(index).tolist(),
            "logprobs": _floats(graph.completion_logprobs(index)),
            "finish_reason": meta["finish_reason"],
            "stop_reason": meta["stop_reason"],
            "content": meta["content"],
            "reasoning": meta["reasoning"],
            "has_tools": meta["has_tools"],
            "tools": graph.tools_index(index),
            "tool_calls": meta["tool_calls"],
            "sampling_requested": meta["sampling_requested"],
            "sampling_applied": meta["sampling_applied"],
            "usage": meta["usage"],
            "timings": meta["timings"],
        }
    )
    return record


def _sequence_record(seq: Sequence, compact: bool) -> dict[str, Any]:
    record: dict[str, Any] = {
        "leaf": seq.node_ids[-1],
        "node_ids": seq.node_ids,
        "length": len(seq.token_ids),
        "trainable_tokens": int(seq.loss_mask.sum()),
    }
    if not compact:
        record["token_ids"] = seq.token_ids.tolist()
        record["loss_mask"] = seq.loss_mask.tolist()
        record["logprobs"] = [
            v if m and math.isfinite(v) else None
            for v, m in zip(seq.logprobs.tolist(), record["loss_mask"], strict=True)
        ]
    return record


# ---- parse ------------------------------------------------------------------------------------


def graph_from_document(doc: dict[str, Any]) -> RolloutGraph:
    """Rebuild the graph of a document (either form) by re-adding its turns in arrival order.

    The parents and discards the graph derives must equal the ones the document states; a
    mismatch means the document was edited or is corrupt, and raises DocumentError."""
    if doc.get("schema") != SCHEMA_ID:
        raise DocumentError(
            f"expected a {SCHEMA_ID!r} document, got schema {doc.get('schema')!r}; "
            "convert it with the workbench version that wrote it"
        )
    compact = doc.get("form") == "compact"
    manifests = doc.get("tools") or []
    graph = RolloutGraph()
    for position, record in enumerate(doc.get("turns", [])):
        if record.get("id") != position:
            raise DocumentError(f"turn at position {position} has id {record.get('id')!r}")
        parent = record.get("parent")
        if compact:
            base = graph.token_ids(parent) if parent is not None else np.zeros(0, np.int32)
            prompt = np.concatenate([base, np.asarray(record["prompt_delta_token_ids"], np.int32)])
            inherited = record["messages_inherited"]
            known = graph.messages(parent) if parent is not None else []
            messages = known[:inherited] + record["messages_delta"]
        else:
            prompt = record["prompt_token_ids"]
            messages = record["messages"]
        logprobs = record["logprobs"]
        turn = Turn(
            prompt_ids=prompt,
            completion_ids=record["completion_token_ids"],
            completion_logprobs=None
            if logprobs is None
            else [math.nan if v is None else v for v in logprobs],
            dialect=record["dialect"],
            route=record["route"],
            aux=record["aux"],
            finish_reason=record["finish_reason"],
            stop_reason=record["stop_reason"],
            messages=messages,
            has_tools=record["has_tools"],
            tools=tool_manifest(manifests, record.get("tools"), position),
            tool_calls=record["tool_calls"],
            content=record["content"],
            reasoning=record["reasoning"],
            sampling_requested=record["sampling_requested"],
            sampling_applied=record["sampling_applied"],
            usage=record["usage"],
            timings=record["timings"],
            engine=record["engine"],
            model=record["model"],
            tier=record["tier"],
            client_stream=record["client_stream"],
            retry_of=record["retry_of"],
        )
        graph.add(turn)
        node = graph.node(position)
        if node.parent != parent:
            raise DocumentError(
                f"turn {position} names parent {parent} but its prompt extends "
                f"{'no turn' if node.parent is None else f'turn {node.parent}'}: "
                "the document was edited or is corrupt"
            )
    for record in doc.get("turns", []):
        if graph.node(record["id"]).discarded != record["discarded"]:
            raise DocumentError(
                f"turn {record['id']} is marked discarded={record['discarded']} but the graph "
                "says otherwise: the document was edited or is corrupt"
            )
    return graph


def tool_manifest(manifests: list[Any], index: Any, turn: int) -> Any:
    """The manifest a turn's `tools` index names in the document's `tools` table (None for
    null); DocumentError when it names none."""
    if index is None:
        return None
    if not isinstance(index, int) or not 0 <= index < len(manifests):
        raise DocumentError(
            f"turn {turn} names tool manifest {index!r} but the document has "
            f"{len(manifests)}: the document was edited or is corrupt"
        )
    return manifests[index]


def expand_document(doc: dict[str, Any]) -> dict[str, Any]:
    """The full form of a document: a compact one is rebuilt through its graph."""
    if doc.get("form") != "compact":
        return doc
    graph = graph_from_document(doc)
    return {
        **doc,
        "form": "full",
        "turns": [_turn_record(graph, i, False) for i in range(len(graph))],
        "sequences": [_sequence_record(s, False) for s in graph.sequences()],
    }


# ---- schema -----------------------------------------------------------------------------------


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


_INT32 = (-(2**31), 2**31 - 1)


def _ids_problem(values: list[Any]) -> str | None:
    if not all(type(v) is int for v in values):
        return "token ids must be integers"
    if values and (min(values) < _INT32[0] or max(values) > _INT32[1]):
        return "token ids must fit in int32"
    return None


def _mask_problem(values: list[Any]) -> str | None:
    ok = all(type(v) is int for v in values) and set(values) <= {0, 1}
    return None if ok else "a loss mask holds only 0 and 1"


def _floats_problem(values: list[Any]) -> str | None:
    ok = all(v is None or type(v) in (int, float) for v in values)
    return None if ok else "logprobs must be numbers or null"


# The per-token arrays are checked here in one pass each, then shown to the JSON Schema empty
# (which still checks that they are present and are arrays): jsonschema walks every element in
# Python, seconds per rollout, minutes for the full form of a long one.
_TOKEN_ARRAYS = {
    "turns": {
        "prompt_token_ids": _ids_problem,
        "prompt_delta_token_ids": _ids_problem,
        "completion_token_ids": _ids_problem,
        "logprobs": _floats_problem,
    },
    "sequences": {
        "token_ids": _ids_problem,
        "loss_mask": _mask_problem,
        "logprobs": _floats_problem,
    },
}


def validate_document(doc: dict[str, Any]) -> list[str]:
    """Problems found checking `doc` against the JSON Schema (empty when it conforms)."""
    problems: list[str] = []
    slim = dict(doc)
    for section, checks in _TOKEN_ARRAYS.items():
        records = doc.get(section)
        if not isinstance(records, list):
            continue  # the schema reports it
        slim[section] = []
        for i, record in enumerate(records):
            if isinstance(record, dict):
                record = dict(record)
                for key, check in checks.items():
                    values = record.get(key)
                    if isinstance(values, list):
                        problem = check(values)
                        if problem:
                            problems.append(f"{section}/{i}/{key}: {problem}")
                        record[key] = []
            slim[section].append(record)
    validator = jsonschema.Draft202012Validator(load_schema())
    problems += [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in sorted(validator.iter_errors(slim), key=lambda e: list(map(str, e.path)))
    ]
    return problems + _tools_problems(doc)


def _tools_problems(doc: dict[str, Any]) -> list[str]:
    """Turns whose `tools` index is past the end of the `tools` table (the schema cannot say)."""
    table = doc.get("tools")
    size = len(table) if isinstance(table, list) else 0
    turns = doc.get("turns")
    return [
        f"turns/{i}/tools: {record['tools']} names no manifest (the tools table has {size})"
        for i, record in enumerate(turns if isinstance(turns, list) else [])
        if isinstance(record, dict)
        and isinstance(record.get("tools"), int)
        and record["tools"] >= size
    ]
