"""The token view of one turn: prompt tokens shaded grey, sampled tokens coloured by probability.

The capture layer never tokenises; the text of each token id comes from the engine's
`/detokenize` (see `token_text.py`) and is HTML-escaped here. A child turn's prompt starts with
its parent's prompt + completion, so by default only the new part of the prompt is shown.
"""

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_PROMPT_TOKENS = 2000  # a root's prompt can be a whole system prompt: show its tail


@dataclass(frozen=True)
class TokenWindow:
    """Which ids of a turn the view shows: the prompt from `hidden` on, and the completion."""

    turn: Mapping[str, Any]
    hidden: int  # leading prompt tokens not shown
    shared_with: Any  # the parent turn id when the hidden part is the parent's sequence
    prompt_ids: list[int]

    @property
    def completion_ids(self) -> list[int]:
        return list(self.turn.get("completion_token_ids") or [])

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def find_turn(doc: Mapping[str, Any], turn_id: Any) -> Mapping[str, Any] | None:
    return next((t for t in doc.get("turns", []) if t["id"] == turn_id), None)


def token_window(doc: Mapping[str, Any], turn_id: Any, *, full_prompt: bool = False) -> TokenWindow:
    """A child turn shows the prompt after its parent's prompt + completion; a root shows its
    last MAX_PROMPT_TOKENS. A compact document only has that delta, whatever is asked."""
    turn = find_turn(doc, turn_id)
    if turn is None:
        raise KeyError(f"turn {turn_id} is not in this rollout")
    parent = turn.get("parent")
    if "prompt_token_ids" not in turn:  # compact form: prompt_delta_token_ids after the parent
        delta = list(turn.get("prompt_delta_token_ids") or [])
        hidden = int(turn.get("prompt_len", len(delta))) - len(delta)
        return TokenWindow(turn, hidden, parent, delta)
    prompt = list(turn["prompt_token_ids"])
    parent_turn = find_turn(doc, parent) if parent is not None else None
    if full_prompt:
        hidden, shared_with = 0, None
    elif parent_turn is not None:
        shared = len(parent_turn.get("prompt_token_ids") or ()) + len(
            parent_turn.get("completion_token_ids") or ()
        )
        hidden, shared_with = min(shared, len(prompt)), parent
    else:
        hidden, shared_with = max(0, len(prompt) - MAX_PROMPT_TOKENS), None
    return TokenWindow(turn, hidden, shared_with, prompt[hidden:])


def probability_colour(logprob: float) -> str:
    """Red (unlikely) through amber to green (certain), light enough to read text on."""
    p = min(1.0, max(0.0, math.exp(logprob)))
    return f"hsl({round(120 * p)}, 75%, 78%)"


def _token_text(token_id: int, texts: Mapping[int, str]) -> str:
    text = texts.get(token_id)
    if text is None:
        return f'<span class="wb-tk-id">⟨{token_id}⟩</span>'
    escaped = html.escape(text)
    # Make layout characters visible without losing them: the body is white-space: pre-wrap.
    return escaped.replace("\t", "→\t").replace("\n", '<span class="wb-ws">↵</span>\n')


def _span(cls: str, token_id: int, texts: Mapping[int, str], title: str, style: str = "") -> str:
    style_attr = f' style="{style}"' if style else ""
    return (
        f'<span class="wb-tk {cls}" title="{html.escape(title, quote=True)}"{style_attr}>'
        f"{_token_text(token_id, texts)}</span>"
    )


def render_tokens(
    doc: Mapping[str, Any],
    turn_id: Any,
    texts: Mapping[int, str],
    *,
    full_prompt: bool = False,
    note: str | None = None,
) -> str:
    """HTML for one turn. `texts` maps token id → text; ids missing from it show as ⟨id⟩."""
    window = token_window(doc, turn_id, full_prompt=full_prompt)
    logprobs = window.turn.get("logprobs")
    parts: list[str] = []
    if window.hidden:
        whose = (
            f"shared with turn {window.shared_with}"
            if window.shared_with is not None
            else "earlier prompt tokens"
        )
        parts.append(f'<span class="wb-elided">… {window.hidden} tokens {whose}</span>\n')
    for offset, token_id in enumerate(window.prompt_ids):
        position = window.hidden + offset
        parts.append(_span("wb-tk-p", token_id, texts, f"prompt #{position} · id {token_id}"))
    for k, token_id in enumerate(window.completion_ids):
        if logprobs is None or k >= len(logprobs) or logprobs[k] is None:
            parts.append(_span("wb-tk-s", token_id, texts, f"sampled #{k} · id {token_id}"))
            continue
        lp = float(logprobs[k])
        title = f"sampled #{k} · id {token_id} · logprob {lp:.4f} · p {math.exp(lp):.3f}"
        parts.append(
            _span("wb-tk-s", token_id, texts, title, f"background:{probability_colour(lp)}")
        )
    return (
        '<div class="wb-tokens">'
        f'<div class="wb-tokens-head">{_header(window, logprobs)}</div>'
        f"{_legend()}"
        + (f'<div class="wb-tokens-note">{html.escape(note)}</div>' if note else "")
        + f'<div class="wb-tokens-body">{"".join(parts)}</div></div>'
    )


def _header(window: TokenWindow, logprobs: Any) -> str:
    turn = window.turn
    prompt_total = window.hidden + len(window.prompt_ids)
    sampled = len(window.completion_ids)
    bits = [
        f"<b>turn {html.escape(str(turn['id']))}</b>",
        html.escape(str(turn.get("role", ""))),
        html.escape(str(turn.get("dialect", ""))),
        f"{prompt_total} prompt tokens",
        f"{sampled} sampled",
        f"finish: {html.escape(str(turn.get('finish_reason') or '—'))}",
    ]
    values = [float(v) for v in (logprobs or []) if v is not None]
    if values:
        bits.append(f"mean logprob {sum(values) / len(values):.3f}")
        bits.append(f"min p {math.exp(min(values)):.3f}")
    elif sampled:
        bits.append("no logprobs (tier text)")
    return " · ".join(b for b in bits if b)


def _legend() -> str:
    stops = "".join(
        f'<span class="wb-legend-stop" style="background:{probability_colour(math.log(p))}"></span>'
        for p in (0.02, 0.2, 0.4, 0.6, 0.8, 0.99)
    )
    return (
        '<div class="wb-tokens-legend"><span class="wb-tk wb-tk-p">prompt</span>'
        f'<span>sampled p = 0</span>{stops}<span>1</span><span class="wb-legend-hint">'
        "hover a token for its id and logprob</span></div>"
    )


def empty_tokens(message: str) -> str:
    return f'<div class="wb-tokens wb-empty">{html.escape(message)}</div>'
