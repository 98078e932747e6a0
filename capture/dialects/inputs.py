"""What the translating dialects do alike to a request: session keys, media, token counts."""

from collections.abc import Mapping
from typing import Any

from capture.dialects.base import AuxEngine, DialectError

# What the engine's /tokenize takes from a chat body (WIRE.md §5); sampling fields are not.
TOKENIZE_FIELDS = (
    "messages",
    "tools",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
)


def as_object(value: Any, what: str) -> dict[str, Any]:
    """A client's JSON object (absent = empty), or a 400 naming the field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DialectError(f"`{what}` must be a JSON object, not {type(value).__name__}.")
    return value


def as_list(value: Any, what: str) -> list[Any]:
    """A client's JSON array (absent = empty), or a 400 naming the field."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise DialectError(f"`{what}` must be a JSON array, not {type(value).__name__}.")
    return value


def as_objects(value: Any, what: str) -> list[dict[str, Any]]:
    """A client's array of objects (absent = empty), or a 400 naming the field."""
    values = as_list(value, what)
    for index, item in enumerate(values):
        if not isinstance(item, dict):
            raise DialectError(
                f"`{what}[{index}]` must be a JSON object, not {type(item).__name__}."
            )
    return values


def as_text(value: Any, what: str) -> str:
    """A client's string (absent = empty), or a 400 naming the field."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DialectError(f"`{what}` must be a string, not {type(value).__name__}.")
    return value


def session_key(headers: Mapping[str, str], query: Mapping[str, str], *sources: str) -> str | None:
    """The session id (WIRE.md §7.3): an explicit `x-session-id` or `?session_id=` first, then the
    dialect's own credentials in order: `bearer`, a header name, or `?key` (the query parameter).

    `headers` is case-insensitive in the proxy (Starlette's Headers); plain dicts use lower case.
    """
    explicit = headers.get("x-session-id") or query.get("session_id")
    if explicit:
        return explicit
    for source in sources:
        if source == "bearer":
            scheme, _, token = headers.get("authorization", "").partition(" ")
            value = token.strip() if scheme.lower() == "bearer" else None
        elif source == "?key":
            value = query.get("key")
        else:
            value = headers.get(source)
        if value and value.strip():  # gemini-cli sends `x-goog-api-key: ""` in gateway mode
            return value.strip()
    return None


def placeholder(kind: str, detail: str = "") -> str:
    """Text standing in for media a text-only engine would reject (WIRE.md §10.11).

    Every dialect replaces images and files with it, so an agent that attaches a screenshot
    still gets an answer instead of the engine's "not a multimodal model" 400.
    """
    return f"[{kind} omitted: the engine is text-only{': ' + detail if detail else ''}]"


async def count_tokens(chat: dict[str, Any], engine: AuxEngine) -> int:
    """Prompt length of a translated request, from the engine's own template: never sampled."""
    body = {key: chat[key] for key in TOKENIZE_FIELDS if key in chat}
    tokenized = await engine.tokenize({"add_generation_prompt": True, **body})
    count = tokenized.get("count")
    return int(count if count is not None else len(tokenized.get("tokens") or []))
