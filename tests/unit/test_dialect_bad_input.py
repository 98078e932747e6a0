"""Any JSON body either translates or is refused with a DialectError (a 4xx in the client's own
shape), never another exception (a 500): each dialect's request shape, with arbitrary JSON in
every slot."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capture.dialects.anthropic import AnthropicDialect
from capture.dialects.base import DialectError
from capture.dialects.google import GoogleDialect
from capture.dialects.responses import ResponsesDialect

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
)
anything = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def shaped(fields: dict) -> st.SearchStrategy:
    """Objects with these keys, each holding its typical shape or arbitrary JSON."""
    return st.fixed_dictionaries({}, optional={k: v | anything for k, v in fields.items()})


def one_of_types(*types: str, **fields) -> st.SearchStrategy:
    return shaped({"type": st.sampled_from(types), **fields})


RESPONSES_ITEM = one_of_types(
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "item_reference", "web_search_call",
    role=st.sampled_from(["user", "assistant", "system", "developer", "tool"]),
    content=st.text(max_size=3) | st.lists(one_of_types(
        "input_text", "output_text", "input_image", "input_file", "refusal", "reasoning_text",
        text=st.text(max_size=3))),
    summary=st.lists(shaped({"text": st.text(max_size=3)})),
    call_id=st.text(max_size=3), name=st.text(max_size=3), arguments=st.text(max_size=5),
    input=st.text(max_size=3), output=st.text(max_size=3), encrypted_content=st.text(max_size=5),
)  # fmt: skip
RESPONSES_BODY = shaped({
    "input": st.text(max_size=3) | st.lists(RESPONSES_ITEM, max_size=4),
    "instructions": st.text(max_size=3),
    "tools": st.lists(one_of_types("function", "custom", "web_search", name=st.text(max_size=3),
                                   parameters=st.just({"type": "object"}))),
    "tool_choice": st.sampled_from(["auto", "none", "required"]) | one_of_types("function", "allowed_tools"),
    "reasoning": shaped({"effort": st.sampled_from(["low", "high"])}),
    "text": shaped({"format": one_of_types("json_schema", "json_object", "text")}),
    "max_output_tokens": st.integers(1, 9), "stream": st.booleans(),
})  # fmt: skip

ANTHROPIC_BLOCK = one_of_types(
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "server_tool_use", "search_result", "tool_reference", "unknown",
    text=st.text(max_size=3), thinking=st.text(max_size=3), id=st.text(max_size=3),
    name=st.text(max_size=3), input=st.dictionaries(st.text(max_size=2), scalars, max_size=2),
    tool_use_id=st.text(max_size=3), is_error=st.booleans(),
    content=st.text(max_size=3) | st.lists(one_of_types("text", "image", text=st.text(max_size=3))),
    source=shaped({"media_type": st.text(max_size=3)}),
)  # fmt: skip
ANTHROPIC_BODY = shaped({
    "messages": st.lists(shaped({"role": st.sampled_from(["user", "assistant", "system"]),
                                 "content": st.text(max_size=3) | st.lists(ANTHROPIC_BLOCK, max_size=3)}),
                         max_size=4),
    "system": st.text(max_size=3) | st.lists(one_of_types("text", text=st.text(max_size=3))),
    "tools": st.lists(shaped({"name": st.text(max_size=3), "input_schema": st.just({"type": "object"})})),
    "tool_choice": one_of_types("auto", "any", "none", "tool", name=st.text(max_size=3),
                                disable_parallel_tool_use=st.booleans()),
    "thinking": one_of_types("enabled", "disabled", "adaptive"),
    "output_config": shaped({"format": shaped({"schema": st.just({"type": "object"})})}),
    "max_tokens": st.integers(1, 9), "stop_sequences": st.lists(st.text(max_size=2)),
})  # fmt: skip

GOOGLE_PART = shaped({
    "text": st.text(max_size=3), "thought": st.booleans(),
    "functionCall": shaped({"id": st.text(max_size=3), "name": st.text(max_size=3),
                            "args": st.dictionaries(st.text(max_size=2), scalars, max_size=2)}),
    "function_response": shaped({"id": st.text(max_size=3), "name": st.text(max_size=3),
                                 "response": st.dictionaries(st.text(max_size=2), scalars, max_size=2)}),
    "inlineData": shaped({"mimeType": st.text(max_size=3)}),
})  # fmt: skip
GOOGLE_BODY = shaped({
    "contents": st.lists(shaped({"role": st.sampled_from(["user", "model", "function"]),
                                 "parts": st.lists(GOOGLE_PART, max_size=3)}), max_size=4),
    "systemInstruction": shaped({"parts": st.lists(GOOGLE_PART, max_size=2)}),
    "tools": st.lists(shaped({"functionDeclarations": st.lists(shaped({
        "name": st.text(max_size=3), "parameters": st.just({"type": "OBJECT"})}))})),
    "toolConfig": shaped({"functionCallingConfig": shaped({
        "mode": st.sampled_from(["AUTO", "ANY", "NONE"]),
        "allowedFunctionNames": st.lists(st.text(max_size=3), max_size=2)})}),
    "generationConfig": shaped({"candidateCount": st.integers(0, 2), "temperature": st.floats(0, 2),
                                "thinkingConfig": shaped({"thinkingBudget": st.integers(0, 9),
                                                          "includeThoughts": st.booleans()}),
                                "responseSchema": st.just({"type": "OBJECT"})}),
})  # fmt: skip

QUICK = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def translates_or_refuses(dialect, body, route) -> None:
    try:
        call = dialect.to_chat(body, route)
    except DialectError as refusal:
        assert refusal.message and 400 <= refusal.status < 500
        return
    assert isinstance(call.body["messages"], list)


@QUICK
@given(RESPONSES_BODY)
def test_responses_bodies(body):
    dialect = ResponsesDialect()
    translates_or_refuses(dialect, body, dialect.match("POST", "/v1/responses"))


@QUICK
@given(ANTHROPIC_BODY)
def test_anthropic_bodies(body):
    dialect = AnthropicDialect()
    translates_or_refuses(dialect, body, dialect.match("POST", "/v1/messages"))


@QUICK
@given(GOOGLE_BODY)
def test_google_bodies(body):
    dialect = GoogleDialect()
    translates_or_refuses(dialect, body, dialect.match("POST", "/v1beta/models/g:generateContent"))
