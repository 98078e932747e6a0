"""Streamed chat deltas add up to the non-streamed message, token by token."""

import json

import pytest

from workbench.engine.config import EngineConfig
from workbench.engine.generation import Engine, GenerationRequest
from workbench.engine.shapes import ChatResult, chat_chunks, chat_json
from workbench.engine.template import normalize_messages
from workbench.engine.toolparse import parse_output

ENGINE = Engine(EngineConfig())
REPLIES = [
    "plain answer with ünïcödé and 日本語",
    "<think>\nfirst this,\nthen that\n</think>\n\nThe answer.",
    '<think>\nplan\n</think>\n\nRunning two.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n'
    '</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "a", "arguments": {"q": "<b>"}}\n</tool_call>',
]


def _result(reply: str) -> ChatResult:
    forced = [*ENGINE.tokenizer.encode(reply), ENGINE.tokenizer.im_end]
    prompt = ENGINE.render_chat(normalize_messages([{"role": "user", "content": "go"}]), None)
    completion = ENGINE.generate(GenerationRequest(prompt, 500, forced=forced, top_n=1))
    parsed = parse_output(completion.text, tools=True)
    return ChatResult(
        model="m",
        prompt_ids=prompt,
        completion=completion,
        parsed=parsed,
        finish_reason="tool_calls" if parsed.tool_calls else completion.finish_reason,
        return_ids=True,
        as_ids=False,
        top_logprobs=1,
        include_reasoning=True,
    )


@pytest.mark.parametrize("reply", REPLIES)
def test_stream_deltas_rebuild_the_message(reply):
    result = _result(reply)
    message = chat_json(ENGINE.tokenizer, result)["choices"][0]["message"]
    chunks = list(
        chat_chunks(ENGINE.tokenizer, result, include_usage=False, continuous_usage=False)
    )
    deltas = [c["choices"][0]["delta"] for c in chunks[1:]]
    assert len(deltas) == len(result.completion.token_ids)
    assert "".join(d.get("content", "") for d in deltas) == (message["content"] or "")
    assert "".join(d.get("reasoning", "") for d in deltas) == (message["reasoning"] or "")
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert [c["index"] for c in calls] == list(range(len(message.get("tool_calls", []))))
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls", [])
    ]
    assert result.completion.token_ids[-1] == ENGINE.tokenizer.im_end
    assert chunks[-1]["choices"][0]["finish_reason"] == result.finish_reason
