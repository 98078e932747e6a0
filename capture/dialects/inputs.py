"""What the translating dialects do alike to a request: credentials, media, token counts."""

from collections.abc import Mapping
from typing import Any

from capture.dialects.base import AuxEngine

# What the engine's /tokenize takes from a chat body (WIRE.md §5); sampling fields are not.
TOKENIZE_FIELDS = ("messages", "tools", "chat_template_kwargs")


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A header value whatever its case (plain dicts in tests, starlette Headers in the proxy)."""
    value = headers.get(name) or headers.get(name.lower())
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name.lower()), None)
    return value.strip() or None if isinstance(value, str) else None


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of `Authorization: Bearer <token>`."""
    scheme, _, token = (header(headers, "authorization") or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def placeholder(kind: str, detail: str = "") -> str:
    """Text standing in for media a text-only engine would reject (WIRE.md §10.11).

    Every dialect replaces images and files with it, so an agent that attaches a screenshot
    still gets an answer instead of the engine's "not a multimodal model" 400.
    """
    return f"[{kind} omitted: the engine is text-only{': ' + detail if detail else ''}]"


async def count_tokens(chat: dict[str, Any], engine: AuxEngine) -> int:
    """Prompt length of a translated request, from the engine's own template: never sampled."""
    body = {key: chat[key] for key in TOKENIZE_FIELDS if chat.get(key)}
    tokenized = await engine.tokenize({**body, "add_generation_prompt": True})
    count = tokenized.get("count")
    return int(count if count is not None else len(tokenized.get("tokens") or []))
