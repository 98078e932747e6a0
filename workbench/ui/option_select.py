"""A native `<select>` as a Gradio component, for choices that are grouped or not selectable.

Gradio's Dropdown has neither option groups nor disabled options; the harness picker needs the
first (grouped by dialect) and the sandbox picker the second (unusable sandboxes stay visible,
greyed, with the reason, but cannot be chosen).
"""

import html
from collections.abc import Sequence
from dataclasses import dataclass

import gradio as gr

_TEMPLATE = """
<label class="wb-select">
  <span class="wb-select-label">${label}</span>
  <select>${groups.map(g => `<optgroup label="${g.name}">${g.options.map(o => `<option
    value="${o.value}" title="${o.title}" ${o.disabled ? 'disabled' : ''}
    ${o.value === value ? 'selected' : ''}>${o.label}</option>`).join('')}</optgroup>`).join('')}
  </select>
  ${note ? `<span class="wb-select-note">${note}</span>` : ''}
</label>
"""

# Delegated listener: the template re-renders on every value change, the element stays.
_ON_LOAD = """
element.addEventListener('change', (e) => {
  if (e.target.tagName === 'SELECT') { props.value = e.target.value; trigger('change'); }
});
"""


@dataclass(frozen=True)
class Option:
    value: str
    label: str
    group: str = ""
    disabled: bool = False
    reason: str | None = None  # why it is disabled (or a hint), shown on hover and in the label


def _groups(options: Sequence[Option]) -> list[dict]:
    groups: dict[str, list[dict]] = {}
    for o in options:
        label = f"{o.label} — {o.reason}" if o.disabled and o.reason else o.label
        groups.setdefault(o.group, []).append(
            {
                "value": html.escape(o.value, quote=True),
                "label": html.escape(label),
                "title": html.escape(o.reason or "", quote=True),
                "disabled": o.disabled,
            }
        )
    return [
        {"name": html.escape(name, quote=True), "options": opts} for name, opts in groups.items()
    ]


def option_select(
    options: Sequence[Option],
    *,
    value: str | None = None,
    label: str = "",
    note: str = "",
    **kwargs,
) -> gr.HTML:
    """The picker; its value is the selected option's `value` (a str). `note` is a help line.

    A factory, not a gr.HTML subclass: Gradio writes a `.pyi` next to every component subclass.
    """
    if value is None:
        value = next((o.value for o in options if not o.disabled), None)
    return gr.HTML(
        value=value,
        html_template=_TEMPLATE,
        js_on_load=_ON_LOAD,
        groups=_groups(options),
        label=html.escape(label),
        note=html.escape(note),
        **kwargs,
    )
