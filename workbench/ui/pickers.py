"""Picker choices built from the Harbor catalogues: harnesses grouped by dialect (only those the
proxy can redirect), sandboxes with the unusable ones disabled and the reason shown, tasks."""

from collections.abc import Sequence
from typing import Any

from workbench.ui.option_select import Option

DIALECT_GROUPS = {
    "chat": "OpenAI chat completions",
    "responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
    "google": "Google generateContent",
}
DEFAULT_HARNESS = "terminus-2"
DEFAULT_SANDBOX = "local"


def harness_options(catalogue: Sequence[Any]) -> list[Option]:
    """Redirectable harnesses, grouped by the dialect they speak by default. A harness that cannot
    be pointed at the proxy could never be captured, so it is not offered."""
    options = []
    for h in catalogue:
        if not h.redirectable or not h.dialects:
            continue
        traits = [
            "runs host-side" if h.host_side else "installs into the sandbox",
            "writes ATIF" if h.writes_atif else "no ATIF",
            "dialects: " + ", ".join(h.dialects),
        ]
        options.append(
            Option(
                value=h.name,
                label=h.name,
                group=DIALECT_GROUPS.get(h.dialects[0], h.dialects[0]),
                reason="; ".join(traits),
            )
        )
    order = list(DIALECT_GROUPS.values())
    return sorted(
        options,
        key=lambda o: (order.index(o.group) if o.group in order else len(order), o.value),
    )


def sandbox_options(catalogue: Sequence[Any]) -> list[Option]:
    """Every sandbox; usable ones first, unusable ones disabled with the reason."""
    usable = [
        Option(value=s.name, label=s.name, group="usable here", reason=s.reason)
        for s in catalogue
        if s.usable
    ]
    unusable = [
        Option(
            value=s.name,
            label=s.name,
            group="not usable here",
            disabled=True,
            reason=s.reason or "not usable",
        )
        for s in catalogue
        if not s.usable
    ]
    return usable + unusable


def default_choice(options: Sequence[Option], preferred: str) -> str | None:
    enabled = [o.value for o in options if not o.disabled]
    if preferred in enabled:
        return preferred
    return enabled[0] if enabled else None


def task_choices(tasks: Sequence[Any]) -> list[tuple[str, str]]:
    return [(t.name, t.name) for t in tasks]
