"""Anthropic Messages (`POST /v1/messages`): Claude Code, the anthropic SDK, opencode.

WIRE.md §6.3. Content blocks become chat messages (`tool_result` blocks become tool messages
ahead of the user's other blocks); the engine's answer goes back as thinking, text and tool_use
blocks, as JSON or as the `event:`-named stream the SDK requires. `count_tokens` is answered from
the engine's `/tokenize` and never samples; `GET /v1/models[/{id}]` in Anthropic's shape.
"""

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from capture import sse
from capture.dialects.answer import (
    Answer,
    ReplayMemory,
    assistant_message,
    dump_arguments,
    sign,
    suffix,
    unsign,
)
from capture.dialects.base import AuxAnswer, AuxEngine, ChatCall, DialectError, Route
from capture.dialects.inputs import (
    as_object,
    as_objects,
    as_text,
    count_tokens,
    placeholder,
    session_key,
)

MESSAGES = ("/v1/messages", "/messages")
COUNT_TOKENS = ("/v1/messages/count_tokens", "/messages/count_tokens")
MODELS = ("/v1/models", "/models")

# Claude Code's first system block; its `cch=` hash changes on every request, which would make
# every prompt differ from the last one's prefix (WIRE.md §6.3.2).
BILLING_HEADER = "x-anthropic-billing-header"

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# Blocks with no chat form: server-side tool calls and results, redacted reasoning, uploads.
DROPPED_BLOCKS = {
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
}


class AnthropicDialect:
    name = "anthropic"

    def __init__(self, memory: ReplayMemory | None = None) -> None:
        self.memory = memory or ReplayMemory()

    # -- routing ---------------------------------------------------------------------------

    def match(self, method: str, path: str) -> Route | None:
        method, path = method.upper(), path.rstrip("/")
        if method == "GET":  # chat's paths too: dispatch asks claims() which one serves it
            if path in MODELS:
                return Route("anthropic", "aux", "models")
            parent, _, model = path.rpartition("/")
            return Route("anthropic", "aux", "model", model=model) if parent in MODELS else None
        if method != "POST":
            return None
        if path in MESSAGES:
            return Route("anthropic", "turn", "messages")
        if path in COUNT_TOKENS:
            return Route("anthropic", "aux", "count_tokens")
        return None

    def session_key(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        # Claude Code's ANTHROPIC_API_KEY and older SDKs send x-api-key; SDK 2.14 and
        # ANTHROPIC_AUTH_TOKEN send a Bearer token (WIRE.md §6.3.1).
        return session_key(headers, query, "x-api-key", "bearer")

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        # The SDKs and Claude Code always send anthropic-version, whichever credential they use.
        return "x-api-key" in headers or "anthropic-version" in headers

    # -- request ---------------------------------------------------------------------------

    def to_chat(self, body: dict[str, Any], route: Route) -> ChatCall:
        chat = self._chat(body)
        for source, target in (
            ("max_tokens", "max_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("top_k", "top_k"),
            ("stop_sequences", "stop"),
        ):
            if body.get(source) is not None:
                chat[target] = body[source]
        choice = as_object(body.get("tool_choice"), "tool_choice")
        if chat.get("tools") and choice.get("disable_parallel_tool_use"):
            chat["parallel_tool_calls"] = False
        output = as_object(body.get("output_config"), "output_config")
        schema = as_object(
            as_object(output.get("format"), "output_config.format").get("schema"), "schema"
        )
        if schema:
            chat["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema},
            }
        model = as_text(body.get("model"), "model") or None
        return ChatCall(body=chat, stream=body.get("stream") is True, client_model=model)

    def _chat(self, body: Any) -> dict[str, Any]:
        """Messages, tools, tool_choice and thinking: what both a turn and count_tokens need."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise DialectError("The request body must be an object with a `messages` list.")
        if not body["messages"]:
            raise DialectError("`messages` must hold at least one message.")
        messages = []
        system = _system_text(body.get("system"))
        if system:
            messages.append({"role": "system", "content": system})
        for message in as_objects(body["messages"], "messages"):
            blocks = _blocks(message.get("content"))
            if message.get("role") == "user":
                messages.extend(_user_messages(blocks))
            elif message.get("role") == "assistant":
                messages.append(self._assistant_message(blocks))
            else:
                raise DialectError(
                    f"Unsupported message role {message.get('role')!r}: use `user` or "
                    "`assistant` (system text goes in the top-level `system` field)."
                )
        chat: dict[str, Any] = {"messages": messages}
        if messages and messages[-1]["role"] == "assistant":
            # A prefill: the model continues that message (WIRE.md §1.2: both flags or a 400).
            chat |= {"continue_final_message": True, "add_generation_prompt": False}
        tools = [tool for tool in map(_chat_tool, as_objects(body.get("tools"), "tools")) if tool]
        choice = as_object(body.get("tool_choice"), "tool_choice")
        if tools:
            chat["tools"] = tools
            if choice:
                chat["tool_choice"] = _chat_tool_choice(choice)
        thinking = as_object(body.get("thinking"), "thinking").get("type")
        if thinking in ("enabled", "adaptive", "disabled"):
            chat["chat_template_kwargs"] = {"enable_thinking": thinking != "disabled"}
        return chat

    def _assistant_message(self, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        texts: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in blocks:
            kind = as_text(block.get("type"), "content[].type")
            if kind == "text":
                texts.append(as_text(block.get("text"), "text.text"))
            elif kind == "thinking":
                thinking = as_text(block.get("thinking"), "thinking.thinking")
                reasoning.append(thinking or unsign(block.get("signature")) or "")
            elif kind == "tool_use":
                arguments = dump_arguments(as_object(block.get("input"), "tool_use.input"))
                name = as_text(block.get("name"), "tool_use.name")
                function = {"name": name, "arguments": arguments}
                call_id = as_text(block.get("id"), "tool_use.id")
                calls.append({"id": call_id, "type": "function", "function": function})
            elif kind not in DROPPED_BLOCKS:
                raise DialectError(f"Unsupported assistant content block type {kind!r}.")
        content = "".join(texts) if texts else None
        return self.memory.recall(assistant_message(content, "".join(reasoning) or None, calls))

    # -- answer ----------------------------------------------------------------------------

    def render(self, reply: dict[str, Any], call: ChatCall) -> dict[str, Any]:
        answer = Answer.from_reply(reply)
        self.memory.remember(answer)
        stop_reason, stop_sequence = _stop(answer)
        return {
            **_message(answer, call),
            "content": _content(answer),
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
        }

    def stream(self, reply: dict[str, Any], call: ChatCall) -> Iterator[str]:
        answer = Answer.from_reply(reply)
        self.memory.remember(answer)
        start = _message(answer, call)
        start["usage"] = {**start["usage"], "output_tokens": 1}
        yield _event("message_start", message={**start, "content": []})
        for index, block in enumerate(_content(answer)):
            yield from _block_events(index, block)
        stop_reason, stop_sequence = _stop(answer)
        yield _event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            usage={"output_tokens": answer.completion_tokens},
        )
        yield _event("message_stop")

    # -- errors ----------------------------------------------------------------------------

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        known = kind in ERROR_TYPES.values() or kind == "api_error"
        error_type = kind if known else ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": error_type, "message": message}}

    def stream_error(self, status: int, message: str, kind: str, call: ChatCall) -> str:
        # The SDK raises on `event: error` wherever it comes (ANT-PY _streaming.py).
        return sse.event("error", self.error_body(status, message, kind))

    # -- aux -------------------------------------------------------------------------------

    async def answer_aux(
        self, route: Route, body: dict[str, Any] | None, engine: AuxEngine
    ) -> AuxAnswer:
        if route.action == "models":
            model = _model_info(engine.served_model)
            page = {"data": [model], "has_more": False, "first_id": model["id"]}
            return AuxAnswer(200, page | {"last_id": model["id"]})
        if route.action == "model":
            # Any model name is served: the proxy rewrites it to the session engine's.
            return AuxAnswer(200, _model_info(route.model or engine.served_model))
        return AuxAnswer(200, {"input_tokens": await count_tokens(self._chat(body), engine)})


# -- request ---------------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise DialectError("Message `content` must be a string or a list of content blocks.")
    return as_objects(content, "content")


def _system_text(system: Any) -> str:
    """The system prompt with Claude Code's per-request billing line taken out."""
    if system is None:
        return ""
    blocks = _blocks(system)
    texts = [as_text(block.get("text"), "system[].text") for block in blocks]
    lines = [
        line
        for text in texts
        for line in text.split("\n")
        if not line.lstrip().startswith(BILLING_HEADER)
    ]
    return "\n".join(lines).strip("\n")


def _media(block: dict[str, Any]) -> str:
    source = as_object(block.get("source"), f"{block['type']}.source")
    detail = source.get("media_type") or block.get("title")
    return placeholder(block["type"], detail if isinstance(detail, str) else "")


def _block_text(block: dict[str, Any]) -> str | None:
    """Text of a user-side block, or None for blocks with no chat form."""
    kind = as_text(block.get("type"), "content[].type")
    if kind == "text":
        return as_text(block.get("text"), "text.text")
    if kind in ("image", "document"):
        return _media(block)
    if kind == "search_result":
        parts = as_objects(block.get("content"), "search_result.content")
        return "\n".join(
            as_text(part.get("text"), "search_result.content[].text") for part in parts
        )
    if kind == "tool_reference":
        return f"[tool: {as_text(block.get('tool_name') or block.get('name'), 'tool_reference')}]"
    if kind in DROPPED_BLOCKS:
        return None
    raise DialectError(f"Unsupported user content block type {kind!r}.")


def _user_messages(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results first (they answer the previous assistant turn), then the user's text."""
    messages = []
    texts = []
    for block in blocks:
        if block.get("type") == "tool_result":
            content = block.get("content")
            parts = [] if content is None else _blocks(content)
            text = "\n".join(t for t in map(_block_text, parts) if t is not None)
            if block.get("is_error"):
                text = f"[Tool Error] {text}"
            call_id = as_text(block.get("tool_use_id"), "tool_result.tool_use_id")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
            continue
        text = _block_text(block)
        if text is not None:
            texts.append(text)
    if texts:
        messages.append({"role": "user", "content": "\n".join(texts)})
    return messages


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any] | None:
    if "input_schema" not in tool:
        return None  # server tools (web_search_*, bash_*, text_editor_*) run at Anthropic only
    name = as_text(tool.get("name"), "tools[].name")
    if not name:
        raise DialectError("Each tool needs a `name`.")
    function = {"name": name, "parameters": as_object(tool["input_schema"], "input_schema")}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _chat_tool_choice(choice: dict[str, Any]) -> Any:
    kind = as_text(choice.get("type"), "tool_choice.type")
    if kind == "tool":
        return {
            "type": "function",
            "function": {"name": as_text(choice.get("name"), "tool_choice.name")},
        }
    return {"any": "required", "none": "none"}.get(kind, "auto")


# -- answer ----------------------------------------------------------------------------------


def _message(answer: Answer, call: ChatCall) -> dict[str, Any]:
    return {
        "id": f"msg_{suffix(answer.id)}",
        "type": "message",
        "role": "assistant",
        "model": call.client_model or "",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": answer.prompt_tokens - answer.cached_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": answer.cached_tokens,
            "output_tokens": answer.completion_tokens,
        },
    }


def _content(answer: Answer) -> list[dict[str, Any]]:
    """Thinking, text, then tool_use; never empty (strict clients read content[0])."""
    blocks: list[dict[str, Any]] = []
    if answer.reasoning:
        blocks.append(
            {"type": "thinking", "thinking": answer.reasoning, "signature": sign(answer.reasoning)}
        )
    if answer.content or not answer.tool_calls:
        blocks.append({"type": "text", "text": answer.content or ""})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}
        for call in answer.tool_calls
    )
    return blocks


def _stop(answer: Answer) -> tuple[str, str | None]:
    """stop_reason and stop_sequence, as vLLM's own Anthropic endpoint maps them (§2.6)."""
    if answer.finish_reason == "length":
        return "max_tokens", None
    if answer.finish_reason == "content_filter":
        return "refusal", None
    if answer.tool_calls:
        return "tool_use", None
    if isinstance(answer.stop_reason, str):
        return "stop_sequence", answer.stop_reason
    return "end_turn", None


def _event(kind: str, **fields: Any) -> str:
    return sse.event(kind, {"type": kind, **fields})


def _block_events(index: int, block: dict[str, Any]) -> Iterator[str]:
    """start, deltas, stop of one content block; indices in start order (ANT-PY accumulate)."""
    kind = block["type"]
    if kind == "thinking":
        yield _event(
            "content_block_start",
            index=index,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        )
        delta = {"type": "thinking_delta", "thinking": block["thinking"]}
        yield _event("content_block_delta", index=index, delta=delta)
        # The signature closes the block, before its stop (vLLM stop_active_block).
        delta = {"type": "signature_delta", "signature": block["signature"]}
        yield _event("content_block_delta", index=index, delta=delta)
    elif kind == "text":
        yield _event("content_block_start", index=index, content_block={"type": "text", "text": ""})
        if block["text"]:
            delta = {"type": "text_delta", "text": block["text"]}
            yield _event("content_block_delta", index=index, delta=delta)
    else:
        opened = {**block, "input": {}}
        yield _event("content_block_start", index=index, content_block=opened)
        # One fragment holding the whole object: the SDK parses the concatenation as JSON.
        delta = {"type": "input_json_delta", "partial_json": dump_arguments(block["input"])}
        yield _event("content_block_delta", index=index, delta=delta)
    yield _event("content_block_stop", index=index)


def _model_info(model: str) -> dict[str, Any]:
    created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return {
        "type": "model",
        "id": model,
        "display_name": model,
        "created_at": created,
        "lifecycle": "active",  # anthropic SDK 2.14 requires it
    }
