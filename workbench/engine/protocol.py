"""Request bodies (vLLM's field names and defaults) and their validation into engine terms.

Unknown fields are accepted and ignored, as vLLM does (`extra="allow"`). Every refusal is an
`EngineError` (400 in vLLM's error shape) naming the parameter and what to send instead.
"""

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from workbench.engine.errors import EngineError
from workbench.engine.sampler import SamplingParams

# Sampling ranges with vLLM's wording (SamplingParams._verify_args).
_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "temperature": (lambda v: v >= 0, "must be non-negative"),
    "top_p": (lambda v: 0 < v <= 1, "must be in (0, 1]"),
    "top_k": (lambda v: v >= -1, "must be 0 (disable), or at least 1"),
    "min_p": (lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    "presence_penalty": (lambda v: -2 <= v <= 2, "must be in [-2, 2]"),
    "frequency_penalty": (lambda v: -2 <= v <= 2, "must be in [-2, 2]"),
    "repetition_penalty": (lambda v: v > 0, "must be greater than zero"),
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")


class StreamOptions(_Body):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class GenerateBody(_Body):
    """Fields shared by /v1/chat/completions and /v1/completions."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    n: int | None = 1
    ignore_eos: bool = False
    skip_special_tokens: bool | None = True
    include_stop_str_in_output: bool = False
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool | None = None
    return_tokens_as_token_ids: bool | None = None
    prompt_logprobs: int | None = None
    echo: bool | None = False
    logprob_token_ids: list[int] | None = None
    logit_bias: dict[str, float] | None = None
    min_tokens: int = 0

    def sampling_params(self, vocab_size: int) -> SamplingParams:
        bias = []
        for key, value in (self.logit_bias or {}).items():
            if not key.lstrip("-").isdigit() or not 0 <= int(key) < vocab_size:
                raise EngineError(
                    f"token_id(s) [{key}] in logit_bias contain out-of-vocab token ids.",
                    param="logit_bias",
                )
            bias.append((int(key), min(max(value, -100.0), 100.0)))
        if self.min_tokens < 0:
            raise EngineError(
                f"min_tokens must be >= 0, got {self.min_tokens}.", param="min_tokens"
            )
        p = SamplingParams(
            logit_bias=tuple(bias),
            min_tokens=self.min_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            top_k=0 if self.top_k is None else self.top_k,
            min_p=self.min_p or 0.0,
            presence_penalty=self.presence_penalty or 0.0,
            frequency_penalty=self.frequency_penalty or 0.0,
            repetition_penalty=1.0 if self.repetition_penalty is None else self.repetition_penalty,
        )
        for name, (ok, rule) in _RANGES.items():
            value = getattr(p, name)
            if not ok(value):
                raise EngineError(f"{name} {rule}, got {value}.", param=name)
        return p

    def check_common(self) -> None:
        if self.n not in (None, 1):
            raise EngineError(
                f"n={self.n} is not supported by the reference engine: it returns one choice per "
                "request. Send n=1 (or omit it) and make several requests instead.",
                param="n",
            )
        if self.stream_options is not None and not self.stream:
            raise EngineError(
                "Stream options can only be defined when `stream=True`.", param="stream_options"
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise EngineError(
                f"max_tokens must be at least 1, got {self.max_tokens}.", param="max_tokens"
            )
        unsupported = {
            "prompt_logprobs": self.prompt_logprobs is not None,
            "echo": bool(self.echo),
            "logprob_token_ids": self.logprob_token_ids is not None,
        }
        for param, used in unsupported.items():
            if used:
                raise EngineError(
                    f"`{param}` is not supported by the reference engine; omit it.", param=param
                )

    @property
    def stops(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]


class ChatBody(GenerateBody):
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = 0
    max_completion_tokens: int | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True

    def check(self, max_logprobs: int) -> None:
        self.check_common()
        top = self.top_logprobs
        if top is not None:
            if top < 0 and top != -1:
                raise EngineError(
                    "`top_logprobs` must be a positive value or -1.", param="top_logprobs"
                )
            if (top == -1 or top > 0) and not self.logprobs:
                raise EngineError(
                    "when using `top_logprobs`, `logprobs` must be set to true.",
                    param="top_logprobs",
                )
            _check_max_logprobs(top, max_logprobs)
        if self.continue_final_message and self.add_generation_prompt:
            raise EngineError(
                "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                param="continue_final_message",
            )
        if self.tools is not None and len(self.tools) == 0:
            raise EngineError(
                "`tools` must not be an empty array. Either provide at least one tool or omit "
                "the field entirely. (parameter=tools)",
                param="tools",
            )
        choice = self.tool_choice
        if choice not in (None, "none") and not self.tools:
            raise EngineError("When using `tool_choice`, `tools` must be set.", param="tool_choice")
        if isinstance(choice, dict):
            name = _function_name(choice)
            names = {_function_name(tool) for tool in self.tools or []}
            if name is None or name not in names:
                raise EngineError(
                    f"Tool '{name}' has not been passed in `tools`.", param="tool_choice"
                )
        elif choice not in (None, "none", "auto", "required"):
            raise EngineError(
                f"Invalid value for `tool_choice`: {choice!r}; use none, auto, required or a "
                "named function.",
                param="tool_choice",
            )

    @property
    def tools_active(self) -> bool:
        return bool(self.tools) and self.tool_choice != "none"

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionBody(GenerateBody):
    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = None
    suffix: str | None = None

    def check(self, max_logprobs: int) -> None:
        self.check_common()
        if self.logprobs is not None:
            if self.logprobs < 0 and self.logprobs != -1:
                raise EngineError("`logprobs` must be a positive value or -1.", param="logprobs")
            _check_max_logprobs(self.logprobs, max_logprobs)
        if self.suffix is not None:
            raise EngineError(
                "`suffix` is not supported by the reference engine; omit it.", param="suffix"
            )
        if self.prompt == [] or self.prompt == [[]]:
            raise EngineError("Prompt cannot be empty.", param="prompt")


class TokenizeBody(_Body):
    model: str | None = None
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = True
    return_token_strs: bool | None = False
    chat_template_kwargs: dict[str, Any] | None = None


class DetokenizeBody(_Body):
    model: str | None = None
    tokens: list[int]


def _function_name(item: dict[str, Any]) -> str | None:
    """The `function.name` of a tool or a named tool_choice; None when it has none."""
    function = item.get("function")
    return function.get("name") if isinstance(function, dict) else None


def _check_max_logprobs(requested: int, max_logprobs: int) -> None:
    if max_logprobs != -1 and (requested == -1 or requested > max_logprobs):
        shown = "the whole vocabulary (-1)" if requested == -1 else requested
        raise EngineError(
            f"Requested sample logprobs of {shown}, which is greater than max allowed: "
            f"{max_logprobs}. Start the engine with a larger --max-logprobs (-1 = no cap).",
            param="top_logprobs",
        )
