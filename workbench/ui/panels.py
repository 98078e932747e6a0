"""HTML of the live panel, the result panel and the engine probe line (pure functions).

The result panel reads only the rollout document, so a finished run and a rollout reopened from
history look the same.
"""

import html
import json
from collections.abc import Mapping
from typing import Any

PHASES = ("queued", "booting", "agent", "verifying", "done")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def activity_message(phase: str, counters: Any | None) -> str:
    """What the run is doing, in words. No session activity and a session with zero turns are
    different states (DESIGN.md §5) and say so."""
    if phase == "queued":
        return "queued — waiting for a sandbox slot"
    if phase == "verifying":
        return "verifier running"
    if phase == "done":
        return "finished"
    if counters is None or phase == "booting":
        return "sandbox booting — no model call yet"
    if counters.turns == 0:
        return "agent running but has not called the model"
    since = counters.seconds_since_last_call
    ago = f"{since:.0f} s ago" if since is not None else "just now"
    return f"agent running · last model call {ago}"


def _stepper(phase: str) -> str:
    current = PHASES.index(phase) if phase in PHASES else -1
    steps = []
    for i, name in enumerate(PHASES):
        state = "done" if i < current else "now" if i == current else "todo"
        steps.append(f'<span class="wb-step wb-step-{state}">{name}</span>')
    return f'<div class="wb-stepper">{"".join(steps)}</div>'


def _tile(label: str, value: Any, test_id: str) -> str:
    return (
        f'<div class="wb-tile"><div class="wb-tile-value" data-testid="{test_id}">{_e(value)}</div>'
        f'<div class="wb-tile-label">{_e(label)}</div></div>'
    )


def live_html(phase: str, counters: Any | None, elapsed_s: float | None) -> str:
    """The live panel: phase stepper, session counters and the activity line."""
    c = counters
    since = c.seconds_since_last_call if c is not None else None
    tiles = [
        _tile("turns", c.turns if c else 0, "live-turns"),
        _tile("roots", c.roots if c else 0, "live-roots"),
        _tile("prompt tokens", c.prompt_tokens if c else 0, "live-prompt"),
        _tile("sampled tokens", c.completion_tokens if c else 0, "live-completion"),
        _tile("since last call", f"{since:.1f} s" if since is not None else "—", "live-since"),
        _tile("errors", c.errors if c else 0, "live-errors"),
        _tile("elapsed", f"{elapsed_s:.0f} s" if elapsed_s is not None else "—", "live-elapsed"),
    ]
    error = (
        f'<div class="wb-live-error">last error: {_e(c.last_error)}</div>'
        if c is not None and getattr(c, "last_error", None)
        else ""
    )
    return (
        f'<div class="wb-live" data-phase="{_e(phase)}">{_stepper(phase)}'
        f'<div class="wb-tiles">{"".join(tiles)}</div>'
        f'<div class="wb-activity" data-testid="live-activity">{_e(activity_message(phase, c))}'
        f"</div>{error}</div>"
    )


def idle_html() -> str:
    return (
        '<div class="wb-live wb-idle" data-phase="idle"><div>Pick a task and press <b>Run</b>: '
        "the phase, turns and tokens appear here while the rollout runs.</div></div>"
    )


def result_html(doc: Mapping[str, Any]) -> str:
    """Outcome, reward and rewards, tier, ATIF verdict and findings of one rollout document."""
    ok = bool(doc.get("ok"))
    error = doc.get("error") or {}
    badge = (
        '<span class="wb-badge wb-ok" data-testid="result-status">ok</span>'
        if ok
        else f'<span class="wb-badge wb-err" data-testid="result-status">'
        f"{_e(error.get('kind') or 'not ok')}</span>"
    )
    reward = doc.get("reward")
    reward_text = "not graded" if reward is None else f"{reward:g}"
    engine = doc.get("engine") or {}
    atif = doc.get("atif") or {}
    facts = [
        ("reward", f'<span data-testid="result-reward">{_e(reward_text)}</span>'),
        ("tier", _e(engine.get("tier"))),
        ("ATIF", _e(atif.get("verdict") or "—") + _detail(atif.get("detail"))),
        ("task", _e((doc.get("task") or {}).get("name") or doc.get("task"))),
        ("harness", _e((doc.get("harness") or {}).get("name") or doc.get("harness"))),
        ("rollout", f"<code>{_e((doc.get('ids') or {}).get('rollout') or doc.get('id'))}</code>"),
    ]
    rows = "".join(f'<div class="wb-fact-k">{k}</div><div>{v}</div>' for k, v in facts)
    message = (
        f'<div class="wb-error-message" data-testid="result-error">{_e(error.get("message"))}</div>'
        if error
        else ""
    )
    rewards = doc.get("rewards")
    rewards_block = (
        f'<pre class="wb-rewards" data-testid="result-rewards">{_e(json.dumps(rewards))}</pre>'
        if rewards is not None
        else ""
    )
    return (
        f'<div class="wb-result">{badge}{message}<div class="wb-facts">{rows}</div>'
        f"{rewards_block}{findings_html(doc.get('findings') or [])}</div>"
    )


def _detail(detail: Any) -> str:
    return f' <span class="wb-muted">({_e(detail)})</span>' if detail else ""


def findings_html(findings: list[Mapping[str, Any]]) -> str:
    if not findings:
        return '<div class="wb-muted">no findings</div>'
    rows = "".join(
        f'<tr class="wb-level-{_e(f.get("level"))}"><td>{_e(f.get("level"))}</td>'
        f"<td><code>{_e(f.get('code'))}</code></td><td>{_e(f.get('message'))}</td>"
        f"<td>{_e(f.get('turn') if f.get('turn') is not None else '')}</td></tr>"
        for f in findings
    )
    return (
        '<table class="wb-findings"><thead><tr><th>level</th><th>code</th><th>message</th>'
        f"<th>turn</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def empty_result_html() -> str:
    return '<div class="wb-result wb-muted">No result yet.</div>'


def probe_html(tier: str, reason: str | None, model: str, url: str) -> str:
    """The engine probe line: the measured tier and, below `tokens`, why."""
    cls = "wb-ok" if tier == "tokens" else "wb-warn"
    why = f'<div class="wb-muted">{_e(reason)}</div>' if reason else ""
    return (
        f'<div class="wb-probe"><span class="wb-badge {cls}" data-testid="probe-tier">'
        f"tier {_e(tier)}</span> <code>{_e(model)}</code> at <code>{_e(url)}</code>{why}</div>"
    )


def probe_error_html(message: str) -> str:
    return f'<div class="wb-probe"><span class="wb-badge wb-err">unreachable</span> {_e(message)}</div>'
