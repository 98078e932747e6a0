"""The engine's answer as the translating dialects read it, and remembered for replay.

Responses, Anthropic and Google hand the engine's assistant message back to their clients in
another shape, and the clients send it back in that shape on the next call. Some of that is
lossy: Anthropic `tool_use.input` and Google `functionCall.args` are objects, so the engine's
argument string (`{"a":1}` vs `{"a": 1}`) is gone, and "no text" no longer says whether the engine
answered `null` or `""`. A replayed assistant message that differs from the engine's renders
different prompt tokens and splits one conversation into several graph roots, so each dialect
remembers the engine's exact message under the lossy form its client echoes and recalls it when
the client replays that form.
"""

import base64
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

SIGNATURE_PREFIX = "cap1:"


def sign(text: str) -> str:
    """An opaque reasoning signature only this proxy reads (Anthropic, Responses, Google)."""
    return SIGNATURE_PREFIX + base64.urlsafe_b64encode(text.encode()).decode()


def unsign(signature: Any) -> str | None:
    """The reasoning text inside one of our signatures, or None for anyone else's."""
    if not isinstance(signature, str) or not signature.startswith(SIGNATURE_PREFIX):
        return None
    try:
        return base64.urlsafe_b64decode(signature[len(SIGNATURE_PREFIX) :]).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """Arguments as the object Anthropic and Google carry; `{}` when not a JSON object."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def dump_arguments(value: Any) -> str:
    """The argument string a replayed object gets when the engine's own string is unknown.

    `json.dumps` with spaced separators and raw UTF-8 is what vLLM's tool parsers produce.
    """
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str

    @property
    def input(self) -> dict[str, Any]:
        return parse_arguments(self.arguments)

    def chat(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class Answer:
    """One non-streaming chat completion from the engine (WIRE.md §2.1), choice 0."""

    id: str
    created: int
    content: str | None
    reasoning: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int | None = None
    cached_tokens: int = 0

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> "Answer":
        choices = reply.get("choices") or [{}]
        choice = choices[0] or {}
        message = choice.get("message") or {}
        usage = reply.get("usage") or {}
        reply_id = str(reply.get("id") or "chatcmpl-capture")
        calls = []
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            arguments = function.get("arguments")
            calls.append(
                ToolCall(
                    # Clients pair results by id; an engine that sends none still gets unique ones.
                    id=call.get("id") or f"call_{suffix(reply_id)}_{index}",
                    name=function.get("name") or "",
                    arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
                )
            )
        details = usage.get("completion_tokens_details") or {}
        prompt_details = usage.get("prompt_tokens_details") or {}
        return cls(
            id=reply_id,
            created=int(reply.get("created") or 0),
            content=message.get("content"),
            # "" is not None: a template renders an empty think block for it.
            reasoning=next(
                (
                    message[k]
                    for k in ("reasoning", "reasoning_content")
                    if message.get(k) is not None
                ),
                None,
            ),
            tool_calls=calls,
            finish_reason=choice.get("finish_reason"),
            stop_reason=choice.get("stop_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            reasoning_tokens=details.get("reasoning_tokens"),
            cached_tokens=int(prompt_details.get("cached_tokens") or 0),
        )

    def message(self) -> dict[str, Any]:
        """The chat-completions assistant message this answer is, as a client should replay it."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.chat() for call in self.tool_calls]
        if self.reasoning is not None:
            message["reasoning"] = self.reasoning
        return message


def suffix(reply_id: str) -> str:
    """The unique part of an engine id (`chatcmpl-XYZ` -> `XYZ`), for ids in other dialects."""
    return reply_id.removeprefix("chatcmpl-") or "capture"


def assistant_message(
    content: str | None, reasoning: str | None, tool_calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """A chat assistant message built from a replayed turn, before recall."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning:
        message["reasoning"] = reasoning
    return message


def as_javascript(value: Any) -> Any:
    """A JSON value as a JavaScript client re-serialises it: `30.0` comes back as `30`."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: as_javascript(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_javascript(item) for item in value]
    return value


def _replay_key(message: dict[str, Any]) -> bytes:
    # What survives every dialect's round trip, through Python and JavaScript clients alike
    # (Claude Code and gemini-cli are JavaScript): the text, and each call's id, name and
    # arguments as an object. Reasoning is left out: clients may drop old thinking blocks.
    calls = [
        [
            call.get("id"),
            (call.get("function") or {}).get("name"),
            as_javascript(parse_arguments((call.get("function") or {}).get("arguments"))),
        ]
        for call in message.get("tool_calls") or []
    ]
    text = json.dumps([message.get("content") or "", calls], sort_keys=True, ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class Recent[K, V]:
    """A bounded, thread-safe map whose least recently used entries go first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def __len__(self) -> int:
        return len(self._entries)


class ReplayMemory:
    """Engine assistant messages keyed by what a client sends back.

    Sessions live in the proxy's memory, so this memory only needs to outlive a conversation.
    Recalled entries stay fresh, so conversations that are still running keep theirs. Keys are
    16-byte digests: an entry costs about one assistant message.
    """

    def __init__(self, capacity: int = 20_000) -> None:
        self._messages: Recent[bytes, dict[str, Any]] = Recent(capacity)

    def remember(self, answer: Answer) -> None:
        message = answer.message()
        self._messages.put(_replay_key(message), message)

    def recall(self, message: dict[str, Any]) -> dict[str, Any]:
        """The engine's exact message for a replayed one, or the replayed one if unknown."""
        known = self._messages.get(_replay_key(message))
        if known is None:
            return message
        exact = {name: value for name, value in known.items() if name != "reasoning"}
        replayed = message.get("reasoning")
        if (replayed or "") == (known.get("reasoning") or ""):
            replayed = known.get("reasoning")
        if replayed is not None:
            exact["reasoning"] = replayed
        return exact

    def __len__(self) -> int:
        return len(self._messages)
