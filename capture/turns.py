"""A Turn: one captured model call, as the proxy hands it to the rollout graph."""

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from capture.types import Dialect, Tier


def as_ids(values: Any) -> np.ndarray:
    return np.asarray(values if values is not None else [], dtype=np.int32)


def as_logprobs(values: Any) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=np.float32)


@dataclass
class Turn:
    """One model call. Ids are the engine's own (the capture layer never tokenises).

    `prompt_ids` is always the full prompt; the graph stores it as a delta from the parent.
    `completion_logprobs` is None when the engine returned none (tier `text`).
    `messages` are the chat-completions messages sent upstream (after translation and shaping).
    `tool_calls` are in OpenAI nested form: {"id", "type": "function", "function": {"name", "arguments"}}.
    `tools` is the request's tool manifest as sent upstream (chat-completions form), None without
    one. The graph keeps one object per distinct manifest: never mutate it.
    """

    prompt_ids: np.ndarray
    completion_ids: np.ndarray
    completion_logprobs: np.ndarray | None
    dialect: Dialect = "chat"
    route: str = "/v1/chat/completions"
    aux: bool = False  # explicit demotion (e.g. from the ATIF trajectory); never earns loss
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    has_tools: bool = False
    tools: list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    content: str | None = None
    reasoning: str | None = None
    sampling_requested: dict[str, Any] = field(default_factory=dict)
    sampling_applied: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # received_at (epoch s), upstream_ms
    engine: str = ""  # engine URL without credentials
    model: str = ""  # served model name
    tier: Tier = "tokens"
    client_stream: bool = False
    retry_of: int | None = None  # index of the turn this request retried (same body digest)

    def __post_init__(self) -> None:
        self.prompt_ids = as_ids(self.prompt_ids)
        self.completion_ids = as_ids(self.completion_ids)
        self.completion_logprobs = as_logprobs(self.completion_logprobs)
