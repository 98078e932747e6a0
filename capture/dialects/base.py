"""The Dialect protocol: what each wire dialect (chat, responses, anthropic, google) provides.

A dialect translates its own request into one chat-completions body, and the engine's
(vLLM-shaped, non-streaming) chat completion back into its own JSON or SSE grammar. The proxy
owns everything else: sessions, shaping, the upstream call, capture, keepalives.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from capture.types import Dialect as DialectName

RouteKind = Literal["turn", "aux"]


@dataclass(frozen=True)
class Route:
    """A matched path. `turn` routes become graph turns; `aux` routes never do."""

    dialect: DialectName
    kind: RouteKind
    action: str  # e.g. "chat", "responses", "messages", "count_tokens", "models", "generate"
    stream: bool | None = None  # fixed by the path itself (Google's :streamGenerateContent)
    model: str | None = None  # model named in the path (Google)


@dataclass
class ChatCall:
    """A dialect request translated to one chat-completions body (before capture shaping)."""

    body: dict[str, Any]
    stream: bool
    client_model: str | None = None
    # Dialect-private state carried from to_chat to render/stream (e.g. include_usage,
    # whether the client asked for logprobs, which tools were `custom`).
    options: dict[str, Any] = field(default_factory=dict)


class DialectError(Exception):
    """Bad input from the client: becomes a 4xx in the dialect's own error shape."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind


class AuxEngine(Protocol):
    """What an aux route may ask of the session's engine (no sampling, never a turn)."""

    served_model: str

    async def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /tokenize with a chat body (messages, tools); returns vLLM's JSON."""
        ...


@dataclass
class AuxAnswer:
    status: int
    body: dict[str, Any] | None  # None = empty body (HEAD, WebSocket refusal)
    headers: dict[str, str] = field(default_factory=dict)


class Dialect(Protocol):
    name: DialectName

    def match(self, method: str, path: str) -> Route | None:
        """Route for `path` (query string already removed), or None if not this dialect's."""
        ...

    def session_key(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """The credential this dialect's clients send; it is the capture session id."""
        ...

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        """Whether the request carries this dialect's clients' own headers (e.g. Anthropic's
        `anthropic-version`). Only asked when several dialects match one path (`GET
        /v1/models`): the first that claims the request serves it, else the first that matched."""
        ...

    def to_chat(self, body: dict[str, Any], route: Route) -> ChatCall:
        """Translate a model-turn request. Raises DialectError on bad input."""
        ...

    def render(self, reply: dict[str, Any], call: ChatCall) -> dict[str, Any]:
        """The engine's chat completion as this dialect's non-streaming JSON body."""
        ...

    def stream(self, reply: dict[str, Any], call: ChatCall) -> Iterator[str]:
        """The same answer as synthetic SSE frames in this dialect's exact event grammar."""
        ...

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """A JSON error body in this dialect's shape."""
        ...

    def stream_error(self, status: int, message: str, kind: str, call: ChatCall) -> str:
        """In-stream error frame(s), sent when the stream has already started."""
        ...

    async def answer_aux(
        self, route: Route, body: dict[str, Any] | None, engine: AuxEngine
    ) -> AuxAnswer:
        """Answer an aux route (count_tokens, models, ...) without sampling."""
        ...
