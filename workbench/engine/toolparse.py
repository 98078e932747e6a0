"""Reasoning and hermes tool-call parsing of completion text (vLLM's qwen3 + hermes parsers).

`parse_output` is the inverse of the template's assistant rendering on canonical text:
`<think>\\nR\\n</think>\\n\\n` + content + ("\\n" if content) + `<tool_call>\\n{json}\\n</tool_call>`
joined by "\\n". It also returns character spans so streamed deltas can be cut per token.
"""

import json
import re
import uuid
from dataclasses import dataclass, field

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


@dataclass
class ParsedOutput:
    reasoning: str | None = None
    content: str | None = None
    tool_calls: list[dict] = field(default_factory=list)  # OpenAI nested form, with ids
    reasoning_span: tuple[int, int] | None = None
    content_span: tuple[int, int] | None = None
    tool_call_ends: list[int] = field(default_factory=list)  # char offset ending each call


def _split_reasoning(text: str, out: ParsedOutput) -> int:
    """Fill the reasoning fields; return where the rest of the text starts."""
    if not text.startswith(THINK_OPEN):
        return 0
    start = len(THINK_OPEN) + (1 if text[len(THINK_OPEN) :].startswith("\n") else 0)
    close = text.find(THINK_CLOSE, len(THINK_OPEN))
    if close == -1:  # cut off while thinking: all of it is reasoning
        out.reasoning, out.reasoning_span = text[start:], (start, len(text))
        return len(text)
    end = max(start, close - 1) if text[:close].endswith("\n") else close
    out.reasoning, out.reasoning_span = text[start:end], (start, end)
    rest = close + len(THINK_CLOSE)
    return rest + 2 if text.startswith("\n\n", rest) else rest


def _parse_calls(text: str, offset: int) -> tuple[list[dict], list[int]] | None:
    calls, ends = [], []
    for m in _CALL.finditer(text, offset):
        try:
            obj = json.loads(m.group(1) if m.group(1) is not None else m.group(2))
        except ValueError:
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        arguments = obj.get("arguments", {})
        calls.append(
            {
                "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
                "type": "function",
                "function": {
                    "name": obj["name"],
                    "arguments": json.dumps(arguments, ensure_ascii=False),
                },
            }
        )
        ends.append(m.end())
    return calls, ends


def parse_output(text: str, *, tools: bool) -> ParsedOutput:
    """Split text into reasoning, content and tool calls (only parsed when `tools` is true).

    As in vLLM's hermes parser, a block that is not valid JSON leaves the whole text as content.
    """
    out = ParsedOutput()
    start = _split_reasoning(text, out)
    end = len(text)
    first = text.find("<tool_call>", start) if tools else -1
    parsed = _parse_calls(text, first) if first != -1 else None
    if parsed:
        out.tool_calls, out.tool_call_ends = parsed
        end = first - 1 if text[:first].endswith("\n") and first > start else first
    content = text[start:end]
    if content or not (out.tool_calls or out.reasoning_span):
        out.content, out.content_span = content, (start, end)
    return out


def count_reasoning_tokens(ids: list[int], think_open: int, think_close: int) -> int:
    """vLLM's count: tokens after the first <think> up to the first </think> (or the end)."""
    if think_open not in ids:
        return 0
    start = ids.index(think_open) + 1
    end = ids.index(think_close, start) if think_close in ids[start:] else len(ids)
    return end - start
