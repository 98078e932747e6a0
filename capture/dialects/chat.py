"""OpenAI Chat Completions (`POST /v1/chat/completions`, `GET /v1/models`): WIRE.md §6.1.

The request is already chat: it passes through (shaping does the rest). The engine's answer goes
back with vLLM-only fields removed, logprobs only when the client asked, the client's own model
name, and `reasoning_content` beside `reasoning` for older clients.
"""

import time
from collections.abc import Iterator, Mapping
from typing import Any

from capture import sse
from capture.dialects.base import AuxAnswer, AuxEngine, ChatCall, DialectError, Route
from capture.sessions import read_session_key

TURN_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
# vLLM extensions no OpenAI client expects (WIRE.md §2.1).
VLLM_TOP_FIELDS = (
    "prompt_token_ids",
    "prompt_logprobs",
    "prompt_text",
    "kv_transfer_params",
    "ec_transfer_params",
    "metrics",
)
VLLM_CHOICE_FIELDS = ("token_ids", "stop_reason", "routed_experts", "weight_versions")
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class ChatDialect:
    name = "chat"

    def match(self, method: str, path: str) -> Route | None:
        path = path.rstrip("/")
        if method == "POST" and path in TURN_PATHS:
            return Route("chat", "turn", "chat")
        if method == "GET" and path in MODELS_PATHS:
            return Route("chat", "aux", "models")
        parent, _, model = path.rpartition("/")
        if method == "GET" and parent in MODELS_PATHS:
            return Route("chat", "aux", "models", model=model)
        return None

    def session_key(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        return read_session_key(headers, query)

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        # OpenAI clients send nothing of their own: chat serves what no other dialect claims.
        return False

    def to_chat(self, body: dict[str, Any], route: Route) -> ChatCall:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise DialectError("`messages` must be a non-empty array of chat messages")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise DialectError(f"`messages[{i}]` must be an object with a string `role`")
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )
        model = body.get("model")
        return ChatCall(
            body=body,
            stream=body.get("stream") is True,
            client_model=model if isinstance(model, str) else None,
            options={"include_usage": include_usage, "logprobs": body.get("logprobs") is True},
        )

    def render(self, reply: dict[str, Any], call: ChatCall) -> dict[str, Any]:
        out = {k: v for k, v in reply.items() if k not in VLLM_TOP_FIELDS}
        if call.client_model:
            out["model"] = call.client_model
        out["choices"] = [self._client_choice(c, call) for c in reply.get("choices") or []]
        return out

    def _client_choice(self, choice: dict[str, Any], call: ChatCall) -> dict[str, Any]:
        out = {k: v for k, v in choice.items() if k not in VLLM_CHOICE_FIELDS}
        if not call.options.get("logprobs"):
            out["logprobs"] = None
        message = out.get("message")
        if isinstance(message, dict) and message.get("reasoning") is not None:
            out["message"] = {**message, "reasoning_content": message["reasoning"]}
        return out

    def stream(self, reply: dict[str, Any], call: ChatCall) -> Iterator[str]:
        """WIRE.md §6.1.4: role chunk, reasoning, content, one tool-call delta per call, finish,
        usage (when asked), [DONE]."""
        head = {
            "id": reply.get("id") or f"chatcmpl-{int(time.time() * 1000)}",
            "object": "chat.completion.chunk",
            "created": reply.get("created") or int(time.time()),
            "model": call.client_model or reply.get("model", ""),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            choice = {"index": 0, "delta": delta, **extra, "finish_reason": finish}
            return sse.data({**head, "choices": [choice]})

        choice = (reply.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        yield chunk({"role": "assistant", "content": ""})
        reasoning = message.get("reasoning") or message.get("reasoning_content")
        if reasoning:
            yield chunk({"reasoning_content": reasoning, "reasoning": reasoning})
        logprobs = choice.get("logprobs") if call.options.get("logprobs") else None
        if message.get("content") or logprobs:
            yield chunk({"content": message.get("content") or ""}, logprobs=logprobs)
        for index, tool_call in enumerate(message.get("tool_calls") or []):
            function = tool_call.get("function") or {}
            fragment = {
                "index": index,
                "id": tool_call.get("id"),
                "type": "function",
                "function": {"name": function.get("name"), "arguments": function.get("arguments")},
            }
            yield chunk({"tool_calls": [fragment]})
        yield chunk({}, choice.get("finish_reason") or "stop")
        if call.options.get("include_usage") and reply.get("usage"):
            usage = reply["usage"]
            usage = {k: usage[k] for k in USAGE_KEYS if k in usage}
            yield sse.data({**head, "choices": [], "usage": usage})
        yield sse.DONE

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}

    def stream_error(self, status: int, message: str, kind: str, call: ChatCall) -> str:
        return sse.data(self.error_body(status, message, kind)) + sse.DONE

    async def answer_aux(
        self, route: Route, body: dict[str, Any] | None, engine: AuxEngine
    ) -> AuxAnswer:
        if route.action != "models":
            return AuxAnswer(404, self.error_body(404, "no such route", "not_found_error"))
        model = {
            "id": route.model or engine.served_model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "harbor-workbench",
        }
        # Any model name is served: the proxy rewrites it to the session engine's.
        return AuxAnswer(200, model if route.model else {"object": "list", "data": [model]})
