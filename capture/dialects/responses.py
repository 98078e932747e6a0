"""OpenAI Responses (`POST /v1/responses`): Codex CLI and opencode's `openai` provider.

WIRE.md §6.2. Input items fold into chat messages (each run of assistant-side items becomes ONE
assistant message); the engine's answer goes back as output items with ids derived from the
engine's completion id, as JSON or as the event sequence Codex consumes. The terminal event is
always `response.completed` (carrying `status: "incomplete"` on `length`): Codex treats a stream
ending any other way as a failure and re-samples. Clients that rely on stored responses
(`item_reference`, `previous_response_id`) are served from the proxy's memory of its own answers.
"""

import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from capture import sse
from capture.dialects.answer import (
    Answer,
    Recent,
    ReplayMemory,
    assistant_message,
    sign,
    suffix,
    unsign,
)
from capture.dialects.base import AuxAnswer, AuxEngine, ChatCall, DialectError, Route
from capture.dialects.inputs import (
    as_object,
    as_objects,
    as_text,
    placeholder,
    session_key,
)

ROUTES = ("/v1/responses", "/responses")

# Codex replays the exact tool schema it declared; a `custom` tool (apply_patch) takes free text.
CUSTOM_TOOL_PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}

ASSISTANT_ITEMS = {"reasoning", "function_call", "custom_tool_call"}


class ResponsesDialect:
    name = "responses"

    def __init__(self, memory: ReplayMemory | None = None, items: int = 20_000) -> None:
        self.memory = memory or ReplayMemory()
        # Clients that store responses send an `item_reference` instead of an item (the AI SDK,
        # opencode) or a `previous_response_id` instead of the history (the openai SDK's
        # conversation state); the proxy answered them, so it resolves both from memory.
        self.items: Recent[str, dict[str, Any]] = Recent(items)
        self.responses: Recent[str, list[dict[str, Any]]] = Recent(max(1, items // 10))

    # -- routing ---------------------------------------------------------------------------

    def match(self, method: str, path: str) -> Route | None:
        if path.rstrip("/") not in ROUTES:
            return None
        if method.upper() == "POST":
            return Route("responses", "turn", "responses")
        if method.upper() == "GET":  # Codex's WebSocket transport (WIRE.md §6.2.6)
            return Route("responses", "aux", "websocket")
        return None

    def session_key(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        return session_key(headers, query, "bearer")

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        return False  # no path of its own is shared

    # -- request ---------------------------------------------------------------------------

    def to_chat(self, body: dict[str, Any], route: Route) -> ChatCall:
        if not isinstance(body, dict):
            raise DialectError("The request body must be a JSON object.")
        if body.get("conversation"):
            raise DialectError(
                "`conversation` needs the Conversations API, which the capture proxy does not "
                "serve: send the whole conversation in `input`, or chain with previous_response_id."
            )
        conversation = self._conversation(body)
        declared = as_objects(body.get("tools"), "tools")
        tools = [tool for tool in map(_chat_tool, declared) if tool]
        custom = {tool["name"] for tool in declared if tool.get("type") == "custom"}
        chat: dict[str, Any] = {"messages": self._messages(body.get("instructions"), conversation)}
        if tools:
            chat["tools"] = tools
            if body.get("tool_choice") is not None:
                chat["tool_choice"] = _chat_tool_choice(body["tool_choice"])
        for source, target in (
            ("max_output_tokens", "max_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("parallel_tool_calls", "parallel_tool_calls"),
        ):
            if body.get(source) is not None:
                chat[target] = body[source]
        effort = as_object(body.get("reasoning"), "reasoning").get("effort")
        if effort:
            chat["reasoning_effort"] = effort
        response_format = _response_format(as_object(body.get("text"), "text").get("format"))
        if response_format:
            chat["response_format"] = response_format
        return ChatCall(
            body=chat,
            stream=body.get("stream") is True,
            client_model=as_text(body.get("model"), "model") or None,
            options={
                "custom_tools": sorted(custom),
                "request": _echo(body),
                "conversation": conversation,
            },
        )

    def _conversation(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Every input item of the conversation: the previous response's, then this request's."""
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list):
            raise DialectError("`input` must be a string or a list of input items.")
        items = [self._resolve(item) for item in as_objects(items, "input")]
        previous = body.get("previous_response_id")
        if not previous:
            return items
        earlier = self.responses.get(as_text(previous, "previous_response_id"))
        if earlier is None:
            raise DialectError(
                f"previous_response_id {previous!r} is not a response this proxy returned "
                "recently: send the whole conversation in `input` (Codex does, with store=false)."
            )
        return [*earlier, *items]

    def _messages(self, instructions: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if isinstance(instructions, str) and instructions:
            messages.append({"role": "system", "content": instructions})
        if isinstance(instructions, list):  # a stored prompt's instructions are items too
            items = [*as_objects(instructions, "instructions"), *items]
        run: list[dict[str, Any]] = []  # the current run of assistant-side items
        for item in items:
            kind = as_text(item.get("type"), "input[].type") or (
                "message" if "role" in item else ""
            )
            if kind in ASSISTANT_ITEMS or (kind == "message" and item.get("role") == "assistant"):
                run.append(item)
                continue
            if run:
                messages.append(self._fold(run))
                run = []
            messages.extend(_other_item(item, kind))
        if run:
            messages.append(self._fold(run))
        return messages

    def _resolve(self, item: dict[str, Any]) -> dict[str, Any]:
        """The item itself, or the output item an `item_reference` names."""
        if item.get("type") != "item_reference":
            return item
        found = self.items.get(as_text(item.get("id"), "item_reference.id"))
        if found is None:
            raise DialectError(
                f"`item_reference` {item.get('id')!r} is not an output item this proxy returned "
                "recently: send the item itself (with the AI SDK, set store: false)."
            )
        return found

    def _fold(self, run: list[dict[str, Any]]) -> dict[str, Any]:
        """One assistant message from a run of reasoning, message and call items."""
        texts: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        for item in run:
            kind = item.get("type") or "message"
            if kind == "reasoning":
                reasoning.append(_reasoning_text(item))
            elif kind == "message":
                texts.append(_text_of(item.get("content")))
            else:
                arguments = as_text(item.get("arguments"), f"{kind}.arguments")
                if kind == "custom_tool_call":
                    text = as_text(item.get("input"), "custom_tool_call.input")
                    arguments = json.dumps({"input": text}, ensure_ascii=False)
                call_id = as_text(item.get("call_id") or item.get("id"), f"{kind}.call_id")
                function = {
                    "name": as_text(item.get("name"), f"{kind}.name"),
                    "arguments": arguments,
                }
                calls.append({"id": call_id, "type": "function", "function": function})
        content = "".join(texts) if texts else None
        message = assistant_message(content, "".join(reasoning) or None, calls)
        return self.memory.recall(message)

    # -- answer ----------------------------------------------------------------------------

    def render(self, reply: dict[str, Any], call: ChatCall) -> dict[str, Any]:
        answer, output = self._answer(reply, call)
        return _response(answer, call, output)

    def stream(self, reply: dict[str, Any], call: ChatCall) -> Iterator[str]:
        answer, output = self._answer(reply, call)
        events = _Events()
        started = _response(answer, call, [], status="in_progress", usage=False)
        yield events.emit("response.created", response=started)
        yield events.emit("response.in_progress", response=started)
        for index, item in enumerate(output):
            yield from _item_events(events, index, item)
        yield events.emit("response.completed", response=_response(answer, call, output))

    def _answer(self, reply: dict[str, Any], call: ChatCall) -> tuple[Answer, list[dict[str, Any]]]:
        """The engine's answer and its output items, both remembered for the client's replay."""
        answer = Answer.from_reply(reply)
        self.memory.remember(answer)
        output = _output(answer, call)
        for item in output:
            self.items.put(item["id"], item)
        conversation = call.options.get("conversation", [])
        self.responses.put(f"resp_{suffix(answer.id)}", [*conversation, *output])
        return answer, output

    # -- errors ----------------------------------------------------------------------------

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        code = _error_code(status, message, kind)
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def stream_error(self, status: int, message: str, kind: str, call: ChatCall) -> str:
        # The SDK's stream state needs `response.created` first; Codex acts on `response.failed`.
        response = {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response",
            "created_at": 0,
            "status": "failed",
            "model": call.client_model or "",
            "output": [],
            "error": {"code": _error_code(status, message, kind), "message": message},
        }
        events = _Events()
        created = {**response, "status": "in_progress", "error": None}
        return events.emit("response.created", response=created) + events.emit(
            "response.failed", response=response
        )

    # -- aux -------------------------------------------------------------------------------

    async def answer_aux(
        self, route: Route, body: dict[str, Any] | None, engine: AuxEngine
    ) -> AuxAnswer:
        # Codex falls back to HTTP + SSE at once on a 426 (codex 0.171: 404 costs it 8 s, 403
        # five reconnects and 10 s). The proxy must send this as the upgrade's denial response.
        message = (
            "The capture proxy does not speak the Responses WebSocket transport: POST "
            "/v1/responses over HTTP (Codex: set supports_websockets = false on the provider)."
        )
        return AuxAnswer(426, self.error_body(426, message, "invalid_request_error"))


def _error_code(status: int, message: str, kind: str) -> str:
    """The codes Codex acts on (CODEX sse/responses.rs): a context overflow is not retried."""
    if "maximum context length" in message or "max_model_len" in message:
        return "context_length_exceeded"
    if status == 429:
        return "rate_limit_exceeded"
    return kind


# -- input items -----------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    """Text of message content: a string, or parts (text, refusal, images as placeholders)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in as_objects(content, "content"):
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            texts.append(as_text(part.get("text"), f"{kind}.text"))
        elif kind == "refusal":
            texts.append(as_text(part.get("refusal"), "refusal.refusal"))
        elif kind == "input_image":
            texts.append(placeholder("image"))
        elif kind in ("input_file", "input_audio"):
            detail = as_text(part.get("filename"), f"{kind}.filename")
            texts.append(placeholder(kind.removeprefix("input_"), detail))
        else:
            raise DialectError(f"Unsupported content part type {kind!r}.")
    return "\n".join(texts)


def _reasoning_text(item: dict[str, Any]) -> str:
    """Reasoning text, from `content`, else `summary`, else our `encrypted_content` (§6.2.4)."""
    content = as_objects(item.get("content"), "reasoning.content")
    if content:
        return "".join(as_text(part.get("text"), "reasoning.content[].text") for part in content)
    summary = as_objects(item.get("summary"), "reasoning.summary")
    if summary:
        return "\n\n".join(
            as_text(part.get("text"), "reasoning.summary[].text") for part in summary
        )
    return unsign(item.get("encrypted_content")) or ""


def _other_item(item: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """Chat messages for a user, system, developer or tool-output item."""
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "system", "developer"):
            raise DialectError(f"Unsupported message role {role!r}: use user, system or developer.")
        return [
            {
                "role": "system" if role == "developer" else role,
                "content": _text_of(item.get("content")),
            }
        ]
    if kind in ("function_call_output", "custom_tool_call_output"):
        call_id = as_text(item.get("call_id"), f"{kind}.call_id")
        return [{"role": "tool", "tool_call_id": call_id, "content": _text_of(item.get("output"))}]
    # Hosted-tool items (local_shell_call, web_search_call, compaction, ...) have no chat form.
    return []


# -- request fields --------------------------------------------------------------------------


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any] | None:
    if tool.get("type") not in ("function", "custom"):
        return None  # hosted tools: web_search, file_search, local_shell, image_generation, mcp
    name = as_text(tool.get("name"), "tools[].name")
    if not name:
        raise DialectError("Each function and custom tool needs a `name`.")
    if tool.get("type") == "function":
        parameters = as_object(tool.get("parameters"), "tools[].parameters")
        function = {"name": name, "parameters": parameters or {"type": "object", "properties": {}}}
        if tool.get("description"):
            function["description"] = tool["description"]
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        return {"type": "function", "function": function}
    function = {"name": name, "parameters": CUSTOM_TOOL_PARAMETERS}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in ("function", "custom"):
        return {"type": "function", "function": {"name": choice.get("name")}}
    if kind == "allowed_tools":
        return "required" if choice.get("mode") == "required" else "auto"
    return "auto"  # a hosted tool was forced: it has no chat form


def _response_format(fmt: Any) -> dict[str, Any] | None:
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        name = as_text(fmt.get("name"), "text.format.name") or "output"
        schema = {"name": name, "schema": as_object(fmt.get("schema"), "text.format.schema")}
        if fmt.get("strict") is not None:
            schema["strict"] = fmt["strict"]
        return {"type": "json_schema", "json_schema": schema}
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def _echo(body: dict[str, Any]) -> dict[str, Any]:
    """Request fields a Response object repeats back to the client."""
    return {
        "instructions": body.get("instructions"),
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "reasoning": body.get("reasoning"),
        "text": body.get("text") or {"format": {"type": "text"}},
        "metadata": body.get("metadata") or {},
    }


# -- output ----------------------------------------------------------------------------------


def _output(answer: Answer, call: ChatCall) -> list[dict[str, Any]]:
    """Output items in Codex's order: reasoning, message, then calls (WIRE.md §6.2.4)."""
    rid = suffix(answer.id)
    items: list[dict[str, Any]] = []
    if answer.reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{rid}",
                "status": "completed",
                "summary": [{"type": "summary_text", "text": answer.reasoning}],
                "content": [{"type": "reasoning_text", "text": answer.reasoning}],
                "encrypted_content": sign(answer.reasoning),
            }
        )
    if answer.content or not answer.tool_calls:
        part = {
            "type": "output_text",
            "text": answer.content or "",
            "annotations": [],
            "logprobs": [],
        }
        items.append(
            {
                "type": "message",
                "id": f"msg_{rid}",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    custom = set(call.options.get("custom_tools") or ())
    for index, tool_call in enumerate(answer.tool_calls):
        item = {"id": f"fc_{rid}_{index}", "call_id": tool_call.id, "name": tool_call.name}
        if tool_call.name in custom:
            text = tool_call.input.get("input")
            item |= {
                "type": "custom_tool_call",
                "input": text if isinstance(text, str) else tool_call.arguments,
            }
        else:
            item |= {"type": "function_call", "arguments": tool_call.arguments}
        items.append({**item, "status": "completed"})
    return items


def _response(
    answer: Answer,
    call: ChatCall,
    output: list[dict[str, Any]],
    status: str | None = None,
    usage: bool = True,
) -> dict[str, Any]:
    incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(
        answer.finish_reason or ""
    )
    return {
        "id": f"resp_{suffix(answer.id)}",
        "object": "response",
        "created_at": answer.created,
        "status": status or ("incomplete" if incomplete else "completed"),
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete and not status else None,
        "model": call.client_model or "",
        "output": output,
        **call.options.get("request", {}),
        "usage": _usage(answer) if usage else None,
    }


def _usage(answer: Answer) -> dict[str, Any]:
    return {
        "input_tokens": answer.prompt_tokens,
        "input_tokens_details": {"cached_tokens": answer.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": answer.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": answer.reasoning_tokens or 0},
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


class _Events:
    """`event:` + `data:` frames with the 0-based `sequence_number` every event carries."""

    def __init__(self) -> None:
        self.sequence = 0

    def emit(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse.event(kind, data)


def _item_events(events: _Events, index: int, item: dict[str, Any]) -> Iterator[str]:
    """Added, content deltas, done: the events of one output item (WIRE.md §6.2.5)."""
    at = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "reasoning":
        text = item["summary"][0]["text"]
        yield events.emit(
            "response.output_item.added",
            output_index=index,
            item={"type": "reasoning", "id": item["id"], "summary": [], "status": "in_progress"},
        )
        part = {"type": "summary_text", "text": ""}
        yield events.emit("response.reasoning_summary_part.added", **at, summary_index=0, part=part)
        yield events.emit(
            "response.reasoning_summary_text.delta", **at, summary_index=0, delta=text
        )
        yield events.emit("response.reasoning_summary_text.done", **at, summary_index=0, text=text)
        part = {"type": "summary_text", "text": text}
        yield events.emit("response.reasoning_summary_part.done", **at, summary_index=0, part=part)
    elif kind == "message":
        text = item["content"][0]["text"]
        opened = {**item, "status": "in_progress", "content": []}
        yield events.emit("response.output_item.added", output_index=index, item=opened)
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        yield events.emit("response.content_part.added", **at, content_index=0, part=part)
        if text:
            yield events.emit(
                "response.output_text.delta", **at, content_index=0, delta=text, logprobs=[]
            )
        yield events.emit(
            "response.output_text.done", **at, content_index=0, text=text, logprobs=[]
        )
        yield events.emit(
            "response.content_part.done", **at, content_index=0, part=item["content"][0]
        )
    else:
        field = "arguments" if kind == "function_call" else "input"
        prefix = (
            "response.function_call_arguments"
            if kind == "function_call"
            else "response.custom_tool_call_input"
        )
        opened = {**item, field: "", "status": "in_progress"}
        yield events.emit("response.output_item.added", output_index=index, item=opened)
        if item[field]:
            yield events.emit(f"{prefix}.delta", **at, delta=item[field])
        yield events.emit(f"{prefix}.done", **at, **{field: item[field]})
    yield events.emit("response.output_item.done", output_index=index, item=item)
