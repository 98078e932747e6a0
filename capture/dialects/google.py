"""Google generateContent: gemini-cli, the google-genai SDKs, opencode's `google` provider.

WIRE.md §6.4. Paths `/{v1,v1beta,v1alpha}/models/{model}:{action}` (actions matched in any case),
fields read in camelCase and snake_case, written in camelCase. Every `functionCall` returned
carries an id, and function responses without one are paired with the open calls by order and
name. The stream is plain `data:` frames with no `[DONE]`: the SDK ends at connection close.
"""

import base64
import json
import re
from collections.abc import Iterator, Mapping
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
    as_list,
    as_object,
    as_objects,
    as_text,
    count_tokens,
    placeholder,
    session_key,
)

PATH = re.compile(
    r"^(?:/(?P<version>v1|v1beta|v1alpha))?/models(?:/(?P<model>[^/:]+)(?::(?P<action>[^/:]+))?)?$",
    re.IGNORECASE,
)
TURN_ACTIONS = {"generatecontent": False, "streamgeneratecontent": True}

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

FINISH_REASONS = {
    "stop": "STOP",
    "tool_calls": "STOP",  # Gemini has no tool-call reason
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}

FUNCTION_MODES = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}


# generationConfig field -> chat field, and the JSON type Gemini's API takes for it.
SAMPLING_FIELDS = (
    ("maxOutputTokens", "max_tokens", int),
    ("temperature", "temperature", float),
    ("topP", "top_p", float),
    ("topK", "top_k", int),
    ("stopSequences", "stop", list),
    ("presencePenalty", "presence_penalty", float),
    ("frequencyPenalty", "frequency_penalty", float),
    ("seed", "seed", int),
)


def _typed(value: Any, what: str, kind: type) -> Any:
    """A generationConfig value of its JSON type, or a 400 at translation (before any engine
    call, so a stream is refused with a plain HTTP error rather than an in-stream one)."""
    if kind is list:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise DialectError(f"`{what}` must be an array of strings.")
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int and numeric and float(value).is_integer():
        return int(value)
    if kind is float and numeric:
        return value
    noun = "an integer" if kind is int else "a number"
    raise DialectError(f"`{what}` must be {noun}, not {type(value).__name__}.")


def get(obj: Any, camel: str) -> Any:
    """A field in either spelling (`systemInstruction` / `system_instruction`)."""
    if not isinstance(obj, dict):
        return None
    if camel in obj:
        return obj[camel]
    return obj.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel))


def thought_signature(text: str) -> str:
    # The SDK holds signatures as bytes, so they must be base64 (a `cap1:` prefix is not).
    return base64.urlsafe_b64encode(sign(text).encode()).decode()


def signed_thought(signature: Any) -> str | None:
    """The reasoning inside one of our thought signatures; None for anyone else's."""
    try:
        return unsign(base64.urlsafe_b64decode(signature).decode())
    except (TypeError, ValueError, UnicodeDecodeError):
        return None


class GoogleDialect:
    name = "google"
    # google-genai (Python) reads a non-`data:` line as JSON and @google/genai (gemini-cli) stops
    # matching its frames after one: both skip blank lines, so that is the keepalive frame.
    keepalive = sse.BLANK_LINE

    def __init__(self, memory: ReplayMemory | None = None) -> None:
        self.memory = memory or ReplayMemory()

    # -- routing ---------------------------------------------------------------------------

    def match(self, method: str, path: str) -> Route | None:
        found = PATH.match(path.rstrip("/"))
        if found is None:
            return None
        model, action = found["model"], (found["action"] or "").lower()
        method = method.upper()
        if method == "POST" and action in TURN_ACTIONS:
            return Route("google", "turn", "generate", stream=TURN_ACTIONS[action], model=model)
        if method == "POST" and action == "counttokens":
            return Route("google", "aux", "count_tokens", model=model)
        if method == "GET" and not action:
            return Route("google", "aux", "model" if model else "models", model=model)
        if found["version"] and action:
            return Route("google", "aux", "unsupported", model=f"{model}:{found['action']}")
        return None

    def session_key(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        # SDKs and gemini-cli: x-goog-api-key; REST callers: ?key=; gemini-cli bearer mode.
        return session_key(headers, query, "x-goog-api-key", "?key", "bearer")

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        # google-genai (Python) defaults to API version v1, so its models.list() and get() ask
        # for `GET /v1/models[/{model}]`, chat's path too; its key header tells them apart.
        return "x-goog-api-key" in headers or "key" in query

    # -- request ---------------------------------------------------------------------------

    def to_chat(self, body: dict[str, Any], route: Route) -> ChatCall:
        chat = self._chat(body)
        config = as_object(get(body, "generationConfig"), "generationConfig")
        if get(config, "candidateCount") not in (None, 1):
            raise DialectError("candidateCount > 1 is not supported: ask for one candidate.")
        for source, target, kind in SAMPLING_FIELDS:
            value = get(config, source)
            if value is not None:
                chat[target] = _typed(value, f"generationConfig.{source}", kind)
        response_format = _response_format(config)
        if response_format:
            chat["response_format"] = response_format
        # A zero budget turns thinking off; asking for thoughts or a budget turns it on. Thoughts
        # are returned either way: the next call must replay them to extend this one's prompt.
        thinking = as_object(get(config, "thinkingConfig"), "thinkingConfig")
        budget = get(thinking, "thinkingBudget")
        if budget == 0 or budget or get(thinking, "includeThoughts"):
            chat["chat_template_kwargs"] = {"enable_thinking": budget != 0}
        return ChatCall(body=chat, stream=bool(route.stream), client_model=route.model)

    def _chat(self, body: Any) -> dict[str, Any]:
        """Messages, tools and tool_choice: what both a turn and countTokens need."""
        if not isinstance(body, dict):
            raise DialectError("The request body must be a JSON object.")
        contents = get(body, "contents")
        if isinstance(contents, dict):
            contents = [contents]
        if not isinstance(contents, list):
            raise DialectError("`contents` must be a list of Content objects (role, parts).")
        messages = []
        system = _texts(_parts(get(body, "systemInstruction")))
        if system:
            messages.append({"role": "system", "content": "\n".join(system)})
        open_calls: list[tuple[str, str]] = []  # (id, name) of calls not answered yet
        for index, content in enumerate(as_objects(contents, "contents")):
            parts = _parts(content)
            if content.get("role") == "model":
                message = self._model_message(parts, index)
                messages.append(message)
                open_calls = [
                    (c["id"], c["function"]["name"]) for c in message.get("tool_calls", [])
                ]
            else:
                messages.extend(_user_messages(parts, index, open_calls))
        chat: dict[str, Any] = {"messages": messages}
        tools = [
            _chat_tool(declaration)
            for tool in as_objects(get(body, "tools"), "tools")
            for declaration in as_objects(get(tool, "functionDeclarations"), "functionDeclarations")
        ]
        if tools:
            chat["tools"] = tools
            config = as_object(get(body, "toolConfig"), "toolConfig")
            calling = as_object(get(config, "functionCallingConfig"), "functionCallingConfig")
            choice = _chat_tool_choice(calling)
            if choice:
                chat["tool_choice"] = choice
        return chat

    def _model_message(self, parts: list[dict[str, Any]], index: int) -> dict[str, Any]:
        texts: list[str] = []
        thoughts: list[str] = []
        signed: list[str] = []
        calls: list[dict[str, Any]] = []
        for number, part in enumerate(parts):
            thought = signed_thought(get(part, "thoughtSignature"))
            if thought is not None:
                signed.append(thought)
            call = get(part, "functionCall")
            if call is not None:
                call = as_object(call, "functionCall")
                arguments = dump_arguments(as_object(call.get("args"), "functionCall.args"))
                name = as_text(call.get("name"), "functionCall.name")
                # Synthesised ids are positional, so every replay gives the same ones.
                call_id = as_text(call.get("id"), "functionCall.id") or f"call_{index}_{number}"
                function = {"name": name, "arguments": arguments}
                calls.append({"id": call_id, "type": "function", "function": function})
            elif isinstance(part.get("text"), str):
                (thoughts if part.get("thought") else texts).append(part["text"])
        content = "".join(texts) if texts else None
        # gemini-cli drops thought parts from its history but keeps the signatures, which carry
        # the same reasoning: without it the replayed turn would not extend the sampled prompt.
        reasoning = "".join(thoughts) or next((t for t in signed if t), None)
        return self.memory.recall(assistant_message(content, reasoning, calls))

    # -- answer ----------------------------------------------------------------------------

    def render(self, reply: dict[str, Any], call: ChatCall) -> dict[str, Any]:
        answer = Answer.from_reply(reply)
        self.memory.remember(answer)
        parts = [part for group in _part_groups(answer) for part in group]
        return _chunk(answer, call, parts, final=True)

    def stream(self, reply: dict[str, Any], call: ChatCall) -> Iterator[str]:
        answer = Answer.from_reply(reply)
        self.memory.remember(answer)
        groups = _part_groups(answer)
        for number, parts in enumerate(groups):
            yield sse.data(_chunk(answer, call, parts, final=number == len(groups) - 1))

    # -- errors ----------------------------------------------------------------------------

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        name = STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": name}}

    def stream_error(self, status: int, message: str, kind: str, call: ChatCall) -> str:
        # Bare JSON, as Google's API sends errors mid-stream: google-genai raises on a chunk that
        # starts with `{"error":`, and @google/genai (gemini-cli) only on a network chunk that
        # parses as JSON whole; it reads a `data:` error frame as an empty answer.
        return sse.dumps(self.error_body(status, message, kind)) + "\n\n"

    # -- aux -------------------------------------------------------------------------------

    async def answer_aux(
        self, route: Route, body: dict[str, Any] | None, engine: AuxEngine
    ) -> AuxAnswer:
        if route.action == "count_tokens":
            request = as_object(get(body, "generateContentRequest"), "generateContentRequest")
            request = request or body
            return AuxAnswer(200, {"totalTokens": await count_tokens(self._chat(request), engine)})
        if route.action == "models":
            return AuxAnswer(200, {"models": [_model_info(engine.served_model)]})
        if route.action == "model":
            return AuxAnswer(200, _model_info(route.model or engine.served_model))
        message = (
            f"`{route.model}` is not served by the capture proxy: use generateContent, "
            "streamGenerateContent or countTokens."
        )
        return AuxAnswer(404, self.error_body(404, message, "not_found"))


# -- request ---------------------------------------------------------------------------------


def _parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        raise DialectError("Each Content needs a `parts` list of Part objects.")
    return as_objects(content["parts"], "parts")


def _texts(parts: list[dict[str, Any]]) -> list[str]:
    return [part["text"] for part in parts if isinstance(part.get("text"), str)]


def _part_text(part: dict[str, Any]) -> str | None:
    """Text of a user-side part; None for parts with no chat form."""
    if isinstance(part.get("text"), str):
        return part["text"]
    for field in ("inlineData", "fileData"):
        media = get(part, field)
        if media is not None:
            return placeholder("file", as_text(get(as_object(media, field), "mimeType"), field))
    for field in ("executableCode", "codeExecutionResult"):
        code = get(part, field)
        if code is not None:
            code = as_object(code, field)
            return as_text(code.get("code") or code.get("output"), field)
    return None


def _user_messages(
    parts: list[dict[str, Any]], index: int, open_calls: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Function responses as tool messages first (they answer the model), then the user's text."""
    messages = []
    texts = []
    for number, part in enumerate(parts):
        result = get(part, "functionResponse")
        if result is None:
            text = _part_text(part)
            if text is not None:
                texts.append(text)
            continue
        result = as_object(result, "functionResponse")
        call_id = _pair(result, open_calls) or f"call_{index}_{number}"
        response = as_object(result.get("response"), "functionResponse.response")
        content = json.dumps(response, ensure_ascii=False)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    if texts:
        messages.append({"role": "user", "content": "\n".join(texts)})
    return messages


def _pair(result: dict[str, Any], open_calls: list[tuple[str, str]]) -> str | None:
    """The call a function response answers: its own id, else the first open call by name."""
    wanted = as_text(result.get("id"), "functionResponse.id")
    for position, (call_id, name) in enumerate(open_calls):
        if call_id == wanted or (not wanted and name == result.get("name")):
            return open_calls.pop(position)[0]
    if wanted:
        return wanted
    return open_calls.pop(0)[0] if open_calls else None


def _lower_types(schema: Any) -> Any:
    """OpenAPI-style `type: "STRING"` (the SDK's Schema) to JSON Schema's `"string"`."""
    if isinstance(schema, list):
        return [_lower_types(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    lowered = {key: _lower_types(value) for key, value in schema.items()}
    if isinstance(lowered.get("type"), str):
        lowered["type"] = lowered["type"].lower()
    return lowered


def _chat_tool(declaration: dict[str, Any]) -> dict[str, Any]:
    name = as_text(declaration.get("name"), "functionDeclarations[].name")
    if not name:
        raise DialectError("Each function declaration needs a `name`.")
    parameters = get(declaration, "parametersJsonSchema") or get(declaration, "parameters")
    parameters = _lower_types(as_object(parameters, "functionDeclarations[].parameters"))
    function = {"name": name, "parameters": parameters or {"type": "object", "properties": {}}}
    if declaration.get("description"):
        function["description"] = declaration["description"]
    return {"type": "function", "function": function}


def _chat_tool_choice(config: dict[str, Any]) -> Any:
    mode = str(get(config, "mode") or "").upper()
    allowed = as_list(get(config, "allowedFunctionNames"), "allowedFunctionNames")
    if mode == "ANY" and len(allowed) == 1:
        name = as_text(allowed[0], "allowedFunctionNames[0]")
        return {"type": "function", "function": {"name": name}}
    return FUNCTION_MODES.get(mode)


def _response_format(config: dict[str, Any]) -> dict[str, Any] | None:
    schema = get(config, "responseJsonSchema") or get(config, "responseSchema")
    if schema:
        schema = as_object(schema, "responseSchema")
        json_schema = {"name": "output", "schema": _lower_types(schema)}
        return {"type": "json_schema", "json_schema": json_schema}
    if get(config, "responseMimeType") == "application/json":
        return {"type": "json_object"}
    return None


# -- answer ----------------------------------------------------------------------------------


def _part_groups(answer: Answer) -> list[list[dict[str, Any]]]:
    """Thought, text and function-call parts, one group per stream chunk; never empty."""
    groups = []
    if answer.reasoning:
        signature = thought_signature(answer.reasoning)
        groups.append([{"text": answer.reasoning, "thought": True, "thoughtSignature": signature}])
    if answer.content or not answer.tool_calls:
        text: dict[str, Any] = {"text": answer.content or ""}
        if answer.reasoning and not answer.tool_calls:
            # Gemini signs the last part when there is no call; clients keep it in history.
            text["thoughtSignature"] = thought_signature(answer.reasoning)
        groups.append([text])
    calls = [
        {"functionCall": {"id": call.id, "name": call.name, "args": call.input}}
        for call in answer.tool_calls
    ]
    if calls:
        # Gemini 3 clients expect a signature on the first call of a turn (WIRE.md §6.4.4).
        calls[0]["thoughtSignature"] = thought_signature(answer.reasoning or "")
        groups.append(calls)
    return groups


def _chunk(
    answer: Answer, call: ChatCall, parts: list[dict[str, Any]], *, final: bool
) -> dict[str, Any]:
    """A GenerateContentResponse; the final one carries finishReason and usageMetadata."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate]}
    if final:
        candidate["finishReason"] = FINISH_REASONS.get(answer.finish_reason or "stop", "OTHER")
        chunk["usageMetadata"] = _usage(answer)
    return chunk | {"modelVersion": call.client_model or "", "responseId": suffix(answer.id)}


def _usage(answer: Answer) -> dict[str, int]:
    thoughts = answer.reasoning_tokens or 0
    usage = {
        "promptTokenCount": answer.prompt_tokens,
        "candidatesTokenCount": answer.completion_tokens - thoughts,
        "totalTokenCount": answer.prompt_tokens + answer.completion_tokens,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    if answer.cached_tokens:
        usage["cachedContentTokenCount"] = answer.cached_tokens
    return usage


def _model_info(model: str) -> dict[str, Any]:
    name = model.removeprefix("models/")
    return {
        "name": f"models/{name}",
        "baseModelId": name,
        "version": "capture",
        "displayName": name,
        "description": "Served through the capture proxy by the session's engine.",
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    }
