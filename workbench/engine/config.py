"""Configuration of one reference-engine server (the flags of `python -m workbench.engine`)."""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workbench.engine.script import ScriptPolicy

LogprobsMode = Literal["processed_logprobs", "raw_logprobs"]


class EngineConfig(BaseModel):
    """What vLLM would take as server flags.

    served_model_name: the only accepted `model` (an empty or missing one is accepted too).
    logprobs_mode: what logprob numbers mean (WIRE.md §4); vLLM's default is raw, ours is
        processed because that is what a trainer needs.
    return_tokens_as_token_ids: server default for the per-request field of the same name.
    script: a scripted policy (a JSON file or a `ScriptPolicy`); None = sample from the model.
    seed: seeds the generator of requests that carry no `seed` (weights are fixed regardless).
    token_ids: False behaves like an engine without `return_token_ids` (`--no-token-ids`).
    max_model_len: context length; also reported by `/v1/models` and `/tokenize`.
    max_logprobs: cap on `top_logprobs` like vLLM's `--max-logprobs` (-1 = whole vocabulary).
    api_key: like vLLM's `--api-key`: `Authorization: Bearer <key>` required on `/v1/*` only.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    served_model_name: str = "workbench-ref"
    logprobs_mode: LogprobsMode = "processed_logprobs"
    return_tokens_as_token_ids: bool = False
    script: Path | ScriptPolicy | None = None
    seed: int = 0
    token_ids: bool = True
    max_model_len: int = Field(default=32768, gt=16)
    max_logprobs: int = Field(default=20, ge=-1)
    api_key: str | None = None
