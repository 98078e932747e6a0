"""Tokenizer, chat template and output parser: the round trips capture depends on."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.engine.template import ChatTemplate, Message, ToolCallText, normalize_messages
from workbench.engine.tokenizer import EngineTokenizer
from workbench.engine.toolparse import parse_output

TOK = EngineTokenizer()
TEMPLATE = ChatTemplate()
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def test_special_and_marker_tokens_are_single_ids():
    for marker in (
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
    ):
        assert len(TOK.encode(marker)) == 1, marker
    assert TOK.vocab_size >= 2000
    assert TOK.encode("<|im_end|>") == [TOK.im_end]


@given(st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_pieces_concatenate_to_the_decoded_text(text):
    ids = TOK.encode(text)
    assert (
        "".join(TOK.pieces(ids, skip_special=False)) == TOK.decode(ids, skip_special=False) == text
    )


def _reply_ids(reply: Message) -> list[int]:
    return [*TOK.encode(TEMPLATE.assistant_text(reply)), TOK.im_end]


def _prefix_stable(history: list[Message], reply: Message, tools) -> bool:
    prompt = TOK.encode(TEMPLATE.render(history, tools))
    follow = [*history, reply, Message(role="user", content="next")]
    replay = TOK.encode(TEMPLATE.render(follow, tools))
    expected = prompt + _reply_ids(reply)
    return replay[: len(expected)] == expected


calls = st.lists(
    st.builds(
        ToolCallText,
        name=st.sampled_from(["bash", "read_file", "x"]),
        arguments=st.dictionaries(st.text(max_size=5), st.text(max_size=8), max_size=2).map(
            lambda d: json.dumps(d, ensure_ascii=False)
        ),
    ),
    max_size=2,
)


@given(
    content=st.text(max_size=40),
    reasoning=st.none() | st.text(max_size=20),
    tool_calls=calls,
)
@settings(max_examples=200, deadline=None)
def test_replayed_replies_are_prefix_stable(content, reasoning, tool_calls):
    history = [Message(role="system", content="sys"), Message(role="user", content="hi")]
    reply = Message(role="assistant", content=content, reasoning=reasoning, tool_calls=tool_calls)
    assert _prefix_stable(history, reply, TOOLS)


@given(
    content=st.text(max_size=40).filter(lambda s: "<tool_call>" not in s and "<think>" not in s),
    reasoning=st.none() | st.text(max_size=20).filter(lambda s: "</think>" not in s),
    tool_calls=calls,
)
@settings(max_examples=200, deadline=None)
def test_parse_inverts_the_template(content, reasoning, tool_calls):
    reply = Message(role="assistant", content=content, reasoning=reasoning, tool_calls=tool_calls)
    parsed = parse_output(TEMPLATE.assistant_text(reply), tools=True)
    assert parsed.reasoning == reasoning
    assert (parsed.content or "") == content
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in parsed.tool_calls] == [
        (c.name, c.arguments) for c in tool_calls
    ]


def test_tool_calls_parse_only_with_tools_and_bad_json_stays_content():
    text = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    assert parse_output(text, tools=False).content == text
    parsed = parse_output(text, tools=True)
    assert parsed.content is None and parsed.tool_calls[0]["id"].startswith("chatcmpl-tool-")
    broken = "ok\n<tool_call>\n{not json}\n</tool_call>"
    assert parse_output(broken, tools=True).content == broken
    assert parse_output("<think>\nstill thinking", tools=True).reasoning == "still thinking"


def test_tools_go_in_the_system_prompt_and_results_in_a_user_turn():
    messages = normalize_messages(
        [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "hi"},
            {"role": "tool", "content": "a"},
            {"role": "tool", "content": "b"},
        ]
    )
    text = TEMPLATE.render(messages, TOOLS)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert '\n{"type": "function", "function": {"name": "bash"' in text
    assert text.count("<|im_start|>user") == 2
    assert (
        "<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response><|im_end|>"
        in text
    )
    assert text.endswith("<|im_start|>assistant\n")


def test_image_parts_are_refused_clearly():
    from workbench.engine.errors import EngineError

    with pytest.raises(EngineError, match="text parts only"):
        normalize_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])


def test_committed_tokenizer_is_the_training_scripts_output():
    from workbench.engine.train_tokenizer import ASSETS, build_tokenizer

    trained = build_tokenizer((ASSETS / "corpus.txt").read_text(encoding="utf-8"))
    committed = json.loads((ASSETS / "tokenizer.json").read_text(encoding="utf-8"))
    assert json.loads(trained.to_str()) == committed
