"""The per-token view of one turn, from a hand-built rollout document."""

import math
import re

import pytest

from capture.document import DocumentMeta, build_document, validate_document
from capture.graph import RolloutGraph
from capture.turns import Turn
from workbench.ui.tokens_view import (
    MAX_PROMPT_TOKENS,
    probability_colour,
    render_tokens,
    token_window,
)

TEXTS = {1: "Hello", 2: " world", 3: "\n", 4: "<script>", 5: "&", 6: " yes", 7: "!"}


def document(logprobs=(-0.01, -2.3)):
    return {
        "turns": [
            {
                "id": 0,
                "parent": None,
                "role": "agent",
                "dialect": "chat",
                "prompt_token_ids": [1, 2, 3],
                "completion_token_ids": [4, 5],
                "logprobs": list(logprobs) if logprobs is not None else None,
                "finish_reason": "stop",
            },
            {
                "id": 1,
                "parent": 0,
                "role": "agent",
                "dialect": "chat",
                "prompt_token_ids": [1, 2, 3, 4, 5, 1],
                "completion_token_ids": [6, 7],
                "logprobs": [-0.5, -0.1],
                "finish_reason": "length",
            },
        ]
    }


def spans(html_text, cls):
    return re.findall(rf'<span class="wb-tk {cls}" title="([^"]*)"([^>]*)>(.*?)</span>', html_text)


def test_prompt_tokens_are_grey_and_sampled_tokens_coloured_by_probability():
    out = render_tokens(document(), 0, TEXTS)
    assert [text for _, _, text in spans(out, "wb-tk-p")][:2] == ["Hello", " world"]
    assert all(style == "" for _, style, _ in spans(out, "wb-tk-p"))
    sampled = spans(out, "wb-tk-s")
    assert len(sampled) == 2
    assert probability_colour(-0.01) in sampled[0][1]
    assert probability_colour(-2.3) in sampled[1][1]
    assert "logprob -2.3000" in sampled[1][0] and f"p {math.exp(-2.3):.3f}" in sampled[1][0]


def test_probability_colour_runs_from_red_to_green():
    assert probability_colour(math.log(1e-9)).startswith("hsl(0,")
    assert probability_colour(0.0).startswith("hsl(120,")


def test_token_text_is_html_escaped_and_newlines_visible():
    out = render_tokens(document(), 0, TEXTS)
    assert "<script>" not in out
    assert "&lt;script&gt;" in out and "&amp;" in out
    assert "↵" in out


def test_child_turn_shows_only_its_new_prompt_tokens():
    window = token_window(document(), 1)
    assert window.hidden == 5 and window.shared_with == 0
    assert window.ids == [1, 6, 7]
    out = render_tokens(document(), 1, TEXTS)
    assert "5 tokens shared with turn 0" in out
    assert len(spans(out, "wb-tk-p")) == 1
    full = render_tokens(document(), 1, TEXTS, full_prompt=True)
    assert len(spans(full, "wb-tk-p")) == 6 and "shared with" not in full


def test_long_root_prompt_shows_its_tail():
    doc = document()
    doc["turns"][0]["prompt_token_ids"] = [1] * (MAX_PROMPT_TOKENS + 7)
    window = token_window(doc, 0)
    assert window.hidden == 7 and len(window.prompt_ids) == MAX_PROMPT_TOKENS


def test_ids_without_text_are_shown_as_ids_with_the_note():
    out = render_tokens(document(), 0, {}, note="token text unavailable")
    assert "⟨4⟩" in out and "token text unavailable" in out


def test_text_tier_turn_has_no_colours_and_says_why():
    out = render_tokens(document(logprobs=None), 0, TEXTS)
    assert all("background" not in style for _, style, _ in spans(out, "wb-tk-s"))
    assert "no logprobs" in out


def test_unknown_turn_is_a_clear_error():
    with pytest.raises(KeyError, match="turn 9"):
        token_window(document(), 9)


def real_document(*, compact: bool):
    graph = RolloutGraph()
    graph.add(Turn([1, 2, 3], [4, 5], [-0.1, -0.2], has_tools=True))
    graph.add(Turn([1, 2, 3, 4, 5, 6], [7], [-0.3], has_tools=True))
    doc = build_document(graph, [], DocumentMeta(), compact=compact)
    validate_document(doc)
    return doc


@pytest.mark.parametrize("compact", [False, True])
def test_both_document_forms_show_the_same_window(compact):
    window = token_window(real_document(compact=compact), 1)
    assert (window.hidden, window.prompt_ids, window.completion_ids) == (5, [6], [7])
    out = render_tokens(real_document(compact=compact), 1, TEXTS)
    assert "5 tokens shared with turn 1" not in out and "5 tokens shared with turn 0" in out
