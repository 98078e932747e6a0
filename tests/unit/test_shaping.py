"""Request shaping: what the engine sees for each tier."""

import copy

from capture.shaping import NO_OP_SAMPLING, shape_chat_body


def shape(body, tier="tokens", ceiling=8192, max_model_len=None):
    return shape_chat_body(
        body,
        tier=tier,
        served_model="served",
        max_tokens_ceiling=ceiling,
        max_model_len=max_model_len,
    )


def chat(**extra):
    return {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}], **extra}


def test_capture_fields_are_forced_at_tier_tokens():
    body = shape(chat(stream=True, stream_options={"include_usage": True})).body
    assert body["return_token_ids"] is True
    assert body["logprobs"] is True
    assert body["top_logprobs"] == 0
    assert body["return_tokens_as_token_ids"] is True
    assert body["include_reasoning"] is True
    assert body["stream"] is False
    assert "stream_options" not in body


def test_client_logprob_request_is_kept():
    body = shape(chat(logprobs=True, top_logprobs=5)).body
    assert body["top_logprobs"] == 5
    # The client reads logprob token strings itself: do not turn them into "token_id:N".
    assert "return_tokens_as_token_ids" not in body


def test_include_reasoning_false_is_never_forwarded():
    for tier in ("tokens", "logprobs", "text"):
        assert shape(chat(include_reasoning=False), tier).body.get("include_reasoning") is not False


def test_model_is_rewritten_to_the_served_name():
    assert shape(chat()).body["model"] == "served"
    assert shape(chat(), "text").body["model"] == "served"


def test_sampling_knobs_are_neutralised_and_recorded():
    shaped = shape(chat(top_p=0.8, top_k=20, temperature=0.7, presence_penalty=1.5))
    assert shaped.sampling_requested == {
        "top_p": 0.8,
        "top_k": 20,
        "temperature": 0.7,
        "presence_penalty": 1.5,
    }
    for knob, value in NO_OP_SAMPLING.items():
        assert shaped.body[knob] == value
        assert shaped.sampling_applied[knob] == value
    assert shaped.body["temperature"] == 0.7  # the policy's own temperature is kept
    assert shaped.sampling_applied["top_p"] == 1.0


def test_eval_tiers_forward_the_harness_knobs_unchanged():
    for tier in ("logprobs", "text"):
        shaped = shape(chat(top_p=0.8, top_k=20), tier)
        assert shaped.body["top_p"] == 0.8 and shaped.body["top_k"] == 20
        assert shaped.sampling_applied["top_p"] == 0.8
    assert "return_token_ids" not in shape(chat(), "text").body


def test_empty_tools_array_is_dropped():
    body = shape(chat(tools=[], tool_choice="auto", parallel_tool_calls=True)).body
    assert "tools" not in body and "tool_choice" not in body
    assert "parallel_tool_calls" not in body


def test_orphan_tool_choice_is_dropped():
    assert "tool_choice" not in shape(chat(tool_choice="required")).body


def test_tools_with_tool_choice_are_kept():
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    body = shape(chat(tools=tools, tool_choice="auto")).body
    assert body["tools"] == tools and body["tool_choice"] == "auto"


def test_max_tokens_is_clamped_to_the_ceiling_and_max_model_len():
    assert shape(chat(max_tokens=32000), ceiling=4096).body["max_tokens"] == 4096
    assert shape(chat(max_tokens=32000), max_model_len=2048).body["max_tokens"] == 2048
    assert (
        shape(chat(max_completion_tokens=64000), ceiling=100).body["max_completion_tokens"] == 100
    )
    assert shape(chat(max_tokens=10)).body["max_tokens"] == 10
    assert shape(chat(), ceiling=512).body["max_tokens"] == 512  # absent: the ceiling applies


def test_system_and_developer_messages_merge_into_one_leading_system_message():
    messages = [
        {"role": "user", "content": "q"},
        {"role": "system", "content": "A"},
        {"role": "developer", "content": [{"type": "text", "text": "B"}]},
        {"role": "assistant", "content": "x"},
    ]
    body = shape({"model": "m", "messages": messages}).body
    assert body["messages"] == [
        {"role": "system", "content": "A\n\nB"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "x"},
    ]


def test_single_leading_system_message_is_kept_as_sent():
    messages = [{"role": "system", "content": [{"type": "text", "text": "S"}]}]
    messages.append({"role": "user", "content": "q"})
    assert shape({"model": "m", "messages": messages}).body["messages"] == messages


def test_reasoning_content_in_history_becomes_reasoning():
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "because"},
    ]
    out = shape({"model": "m", "messages": history}).body["messages"]
    assert out[1] == {"role": "assistant", "content": "a", "reasoning": "because"}


def test_shaping_never_mutates_the_client_body():
    body = chat(tools=[], top_p=0.5, messages=[{"role": "developer", "content": "d"}])
    before = copy.deepcopy(body)
    shape(body)
    assert body == before


def test_unset_temperature_is_pinned_so_the_turn_records_what_was_sampled():
    # Unset, vLLM would take generation_config.json's default (Qwen3: 0.6) unrecorded.
    shaped = shape(chat())
    assert shaped.body["temperature"] == 1.0
    assert shaped.sampling_applied["temperature"] == 1.0
    assert "temperature" not in shape(chat(), "text").body  # eval tiers forward as sent
