"""Bodies the proxy cannot capture as asked are refused with a 4xx in the caller's own dialect
before any engine call (no turn recorded), never answered with something silently different.
Real HTTP through the official SDKs (httpx for Google's raw stream)."""

import anthropic
import httpx
import openai
import pytest

from tests.integration.dialect_fixtures import Stack

ASK = [{"role": "user", "content": "Say hi."}]


def turns(stack: Stack, key: str) -> int:
    return stack.registry.get(key).counters().turns


def test_chat_n_above_one_is_refused_not_answered_with_one_choice(stack: Stack):
    key = stack.session()
    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="m", messages=ASK, n=3)
    assert "n must be 1" in refused.value.message
    assert "one sample per call" in refused.value.message
    assert turns(stack, key) == 0


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_chat_max_tokens_zero_is_refused_not_raised_to_one(stack: Stack, field: str):
    key = stack.session()
    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="m", messages=ASK, **{field: 0})
    assert f"{field} must be a positive integer" in refused.value.message
    assert turns(stack, key) == 0


def test_anthropic_empty_messages_is_refused_and_records_no_turn(stack: Stack):
    key = stack.session()
    client = anthropic.Anthropic(base_url=stack.url, api_key=key, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="m", max_tokens=8, messages=[])
    assert refused.value.body["type"] == "error"
    assert "at least one message" in refused.value.body["error"]["message"]
    assert turns(stack, key) == 0


def test_anthropic_max_tokens_zero_is_refused(stack: Stack):
    key = stack.session()
    client = anthropic.Anthropic(base_url=stack.url, api_key=key, max_retries=0)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="m", max_tokens=0, messages=ASK)
    assert turns(stack, key) == 0


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("maxOutputTokens", "x", "must be an integer"),
        ("temperature", "hot", "must be a number"),
        ("stopSequences", "END", "array of strings"),
        ("maxOutputTokens", 0, "max_tokens must be a positive integer"),
    ],
)
def test_google_stream_with_bad_generation_config_is_a_plain_http_400(
    stack: Stack, field: str, value: object, words: str
):
    key = stack.session()
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Say hi."}]}],
        "generationConfig": {field: value},
    }
    with httpx.stream(
        "POST",
        f"{stack.url}/v1beta/models/m:streamGenerateContent?alt=sse",
        json=body,
        headers={"x-goog-api-key": key},
    ) as response:
        response.read()
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == 400 and words in error["message"]
    assert turns(stack, key) == 0
