"""Server-sent-event framing shared by every dialect's synthetic stream."""

import json
from typing import Any

DONE = "data: [DONE]\n\n"
KEEPALIVE = ": keepalive\n\n"
# An empty line ends no event when no data is pending: every SSE parser skips it, including the
# ones that choke on comments (google-genai reads non-`data:` lines as JSON).
BLANK_LINE = "\n"
MEDIA_TYPE = "text/event-stream"
# Proxies (nginx, the Space's) must not buffer a stream the agent is waiting on.
HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def dumps(obj: Any) -> str:
    """Compact JSON, as engines and SDK servers send it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def data(obj: Any) -> str:
    """One `data:` frame (chat, Google)."""
    return f"data: {dumps(obj)}\n\n"


def event(name: str, obj: Any) -> str:
    """One named frame (Responses, Anthropic)."""
    return f"event: {name}\ndata: {dumps(obj)}\n\n"


def comment(text: str) -> str:
    """A comment line: ignored by SSE parsers, keeps idle connections open."""
    return "".join(f": {line}\n" for line in text.splitlines() or [""]) + "\n"
