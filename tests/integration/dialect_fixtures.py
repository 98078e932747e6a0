"""Shared by the dialect SDK tests: one scripted reference engine, one capture proxy on a real
port, and what each test checks in the session's graph.

The script drives a 3-turn tool loop in every dialect: the user asks to list the files (the model
thinks, says a sentence and calls `bash`), the tool answers (the model reports), the user says
bye (the model says bye).
"""

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from capture.dialects.base import Dialect
from capture.proxy import create_capture_app
from capture.serving import CaptureServer
from capture.settings import CaptureSettings
from capture.shaping import shape_chat_body
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.engine.script import ScriptPolicy

SYSTEM = "You are a careful agent."
ASK = "List the files, please."
TOOL_OUTPUT = "README.md"
BYE = "Thanks, bye."
THOUGHT = "I should list the files."
SAYS = "Let me look."
COMMAND = {"cmd": "ls -la"}
REPORT = "The directory holds README.md."
FAREWELL = "Bye."
WAIT = "Wait a moment."
WAITED = "Done waiting."
# The engine's argument string; a JavaScript agent echoes `30.0` back as `30`.
SLEEP_ARGUMENTS = '{"cmd": "sleep 1", "timeout": 30.0}'
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"

SCRIPT = ScriptPolicy(
    rules=[
        {"role": "user", "match": "(?i)bye", "reply": FAREWELL},
        {"role": "tool", "match": "README", "reply": REPORT},
        {"role": "tool", "match": "Done", "reply": "Patched."},
        {"role": "tool", "match": "slept", "reply": WAITED},
        {
            "role": "user",
            "match": "(?i)wait a moment",
            "reply": '<tool_call>\n{"name": "bash", "arguments": '
            '{"cmd": "sleep 1", "timeout": 30.0}}\n</tool_call>',
        },
        {
            "role": "user",
            "match": "(?i)apply the patch",
            "reply": '<tool_call>\n{"name": "apply_patch", "arguments": {"input": "'
            + PATCH.replace("\n", "\\n")
            + '"}}\n</tool_call>',
        },
        {
            "role": "user",
            "match": "(?i)list the files",
            "reply": f"<think>\n{THOUGHT}\n</think>\n\n{SAYS}\n"
            '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls -la"}}\n</tool_call>',
        },
    ],
    default="I have nothing to add.",
)
BASH_SCHEMA = {
    "type": "object",
    "properties": {"cmd": {"type": "string", "description": "The command line."}},
    "required": ["cmd"],
}
# The same tool in chat-completions form (the chat dialect's and the engine's own tests).
BASH_TOOL = {
    "type": "function",
    "function": {"name": "bash", "description": "Run a shell command.", "parameters": BASH_SCHEMA},
}
MAX_TOKENS = 512


class Stack:
    """The scripted reference engine and a capture proxy in front of it, each on a real port.

    A test module opens one: `with Stack() as stack: yield stack` in a module-scoped fixture.
    keepalive_s: how often the proxy sends keepalives while the engine works; the default is
        shorter than any engine call, so every stream carries some.
    """

    def __init__(self, keepalive_s: float = 0.02) -> None:
        self.settings = CaptureSettings(max_tokens_ceiling=MAX_TOKENS, keepalive_s=keepalive_s)

    def __enter__(self) -> "Stack":
        self.engine = EngineServer(EngineConfig(script=SCRIPT)).start()
        app = create_capture_app(self.settings)
        self.registry = app.state.registry
        self.proxy = CaptureServer(app).start()
        self.url = self.proxy.url
        return self

    def __exit__(self, *exc: object) -> None:
        self.proxy.stop()
        self.engine.stop()

    def session(self) -> str:
        """A new capture session on the engine; its id is the key the SDK sends."""
        response = httpx.post(f"{self.url}/sessions", json={"engine": {"url": self.engine.url}})
        assert response.status_code == 201, response.text
        assert response.json()["tier"] == "tokens", response.text
        return response.json()["session_id"]

    def graph(self, session_id: str):
        return self.registry.get(session_id).graph

    def assert_one_chain(self, session_id: str, dialect: str, turns: int) -> None:
        """`turns` calls of one conversation: one root, each turn the child of the one before."""
        g = self.graph(session_id)
        assert len(g) == turns
        assert g.counters()["roots"] == 1, [g.node(i).drift for i in range(len(g))]
        assert [g.node(i).parent for i in range(turns)] == [None, *range(turns - 1)]
        assert {g.turn(i).dialect for i in range(turns)} == {dialect}

    def assert_captured_as_engine_returned(
        self, session_id: str, dialect: Dialect, path: str, native: dict[str, Any], index: int
    ) -> None:
        """Turn `index` holds exactly what the engine answers for this native request's
        translation: the same chat messages, prompt ids, completion ids and logprobs."""
        shaped = shape_chat_body(
            dialect.to_chat(native, dialect.match("POST", path)).body,
            tier="tokens",
            served_model="workbench-ref",
            max_tokens_ceiling=MAX_TOKENS,
            max_model_len=EngineConfig().max_model_len,
        )
        turn = self.graph(session_id).turn(index)
        assert turn.messages == shaped.body["messages"]
        url = f"{self.engine.url}/v1/chat/completions"
        response = httpx.post(url, json=shaped.body, timeout=60)
        assert response.status_code == 200, response.text
        reply = response.json()
        choice = reply["choices"][0]
        assert turn.prompt_ids.tolist() == reply["prompt_token_ids"]
        assert turn.completion_ids.tolist() == choice["token_ids"]
        expected = [entry["logprob"] for entry in choice["logprobs"]["content"]]
        assert turn.completion_logprobs.tolist() == pytest.approx(expected, abs=1e-6)

    def tokenize(self, chat: dict[str, Any]) -> int:
        """The engine's own prompt length for a chat body (what count_tokens must answer)."""
        body = {"messages": chat["messages"], "add_generation_prompt": True}
        if chat.get("tools"):
            body["tools"] = chat["tools"]
        response = httpx.post(f"{self.engine.url}/tokenize", json=body, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()["count"]


@contextmanager
def no_warnings() -> Iterator[None]:
    """Fails if the SDK warned while parsing (e.g. a pydantic serializer or a stream warning).

    ResourceWarnings are left out: the garbage collector may finalise an earlier test's unclosed
    client socket at any point inside the block, which says nothing about this parse.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ResourceWarning)
        yield
    warned = [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]
    assert not warned, warned
