"""The chat template: OpenAI messages -> ChatML prompt text and ids (jinja2, hermes-style tools).

Messages are first normalised (content parts joined, `developer` -> `system`, `reasoning_content`
accepted as an alias of `reasoning`, tool-call arguments kept as the exact JSON text the client
sent back), then rendered by `assets/chat_template.jinja`. `assistant_text` renders a reply body
with the same template, so the text the engine emits for a reply is the text the template will
render when that reply is replayed in history.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from jinja2.sandbox import ImmutableSandboxedEnvironment

from workbench.engine.errors import EngineError

TEMPLATE_PATH = Path(__file__).parent / "assets" / "chat_template.jinja"
_HEADER = "<|im_start|>assistant\n"


@dataclass
class ToolCallText:
    name: str
    arguments: str  # JSON text, rendered verbatim


@dataclass
class Message:
    role: str
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCallText] = field(default_factory=list)


def _content_text(content: object, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise EngineError(
                    f"messages[{index}]: content part of type {kind!r} is not supported by "
                    "this text-only model; send text parts only.",
                    param="messages",
                )
            texts.append(str(part.get("text", "")))
        return "\n".join(texts)
    raise EngineError(f"messages[{index}].content must be a string or a list of parts.")


def _tool_call(call: object, index: int) -> ToolCallText:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise EngineError(
            f"messages[{index}].tool_calls: each call needs function.name and function.arguments.",
            param="messages",
        )
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCallText(name=function["name"], arguments=arguments)


def normalize_messages(messages: list[dict]) -> list[Message]:
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise EngineError(f"messages[{i}] must be an object with a `role`.", param="messages")
        role = "system" if m["role"] == "developer" else m["role"]
        reasoning = m.get("reasoning", m.get("reasoning_content"))
        calls = [_tool_call(c, i) for c in m.get("tool_calls") or []]
        out.append(
            Message(
                role=role,
                content=_content_text(m.get("content"), i),
                reasoning=reasoning if isinstance(reasoning, str) else None,
                tool_calls=calls,
            )
        )
    return out


class ChatTemplate:
    def __init__(self, path: Path = TEMPLATE_PATH) -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        # jinja's own tojson escapes <, >, & and ' for HTML; prompts need plain JSON.
        env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False)
        self._template = env.from_string(path.read_text(encoding="utf-8"))

    def render(
        self,
        messages: list[Message],
        tools: list[dict] | None = None,
        *,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> str:
        return self._template.render(
            messages=messages,
            tools=tools or None,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
        )

    def assistant_text(self, reply: Message) -> str:
        """The body the template renders for an assistant reply (between header and <|im_end|>)."""
        text = self.render([reply], add_generation_prompt=False, continue_final_message=True)
        return text.removeprefix(_HEADER)
