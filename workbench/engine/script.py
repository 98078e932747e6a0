"""Scripted policy: the engine emits given replies instead of sampling.

A script is a JSON file (or a `ScriptPolicy` built in Python)::

    {
      "rules": [
        {"name": "start", "role": "user", "match": "(?i)create .*hello\\\\.txt",
         "assistant_turns": 0,
         "reply": "{\\"analysis\\": \\"...\\", \\"commands\\": [...], \\"task_complete\\": false}"},
        {"role": "tool", "match": "No such file",
         "reply": "<tool_call>\\n{\\"name\\": \\"bash\\", \\"arguments\\": {\\"cmd\\": \\"ls\\"}}\\n</tool_call>"},
        {"name": "verify", "anywhere": "hello\\\\.txt", "assistant_turns": 1,
         "reply": "{\\"analysis\\": \\"done\\", \\"commands\\": [], \\"task_complete\\": true}"},
        {"match": "task_complete", "reply": "Done."}
      ],
      "default": "I have nothing more to do."
    }

Rules are tried in order; the first whose conditions all hold gives the reply. Conditions
(every one optional; a rule with none always matches):

- `role` + `match`: `match` is a Python regex searched (`re.search`, so not anchored; use inline
  flags such as `(?s)` or `(?i)`) in the content of the LAST message with that `role`
  ("system", "user", "assistant" or "tool"; `developer` counts as "system"). Without `role`,
  the last message of the conversation, whatever its role. No such message = no match. Content
  parts are joined by newlines, as the template sees them.
- `anywhere`: a regex searched in the whole conversation (every message's content, joined by
  newlines), e.g. to recognise the task from its instruction on later turns.
- `assistant_turns`: the number of assistant messages already in the conversation (0 on the
  first call of a task, 1 on the second, ...).
- `name`: a label only, for your own reading.

`default` (optional) answers when no rule matches; without it, such requests are sampled from
the model as if no script were loaded.

A reply is raw completion text, newlines and JSON included, written as the model would write
it: optional `<think>\\n...\\n</think>\\n\\n`, content, then hermes tool calls
`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` (tool calls are parsed into
`tool_calls` only when the request carries tools, as with vLLM's hermes parser). The engine
first normalises the reply into the chat template's canonical form (a plain-text reply is left
exactly as written; tool-call JSON is re-serialised with `json.dumps`), then emits its canonical
token ids followed by `<|im_end|>`. So a reply replayed faithfully in the next request's history
renders to exactly the ids emitted. Logprobs are still the model's for those tokens, under the
request's sampling transform (see `sampler.py` for tokens a top_p/top_k/min_p mask removed).
Sampling limits still apply: `max_tokens` truncates a reply (finish_reason "length") and stop
strings cut it.
"""

import json
import logging
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

log = logging.getLogger("workbench.engine.script")
ScriptRole = Literal["system", "user", "assistant", "tool"]


class ScriptRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    role: ScriptRole | None = None
    match: str | None = None
    anywhere: str | None = None
    assistant_turns: int | None = None
    reply: str

    @field_validator("match", "anywhere")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regex {pattern!r}: {exc}") from None
        return pattern

    def matches(self, conversation: list[tuple[str, str]]) -> bool:
        """`conversation` is [(role, content text)] with `developer` already folded into system."""
        if self.assistant_turns is not None:
            turns = sum(1 for role, _ in conversation if role == "assistant")
            if turns != self.assistant_turns:
                return False
        if self.anywhere is not None:
            transcript = "\n".join(text for _, text in conversation)
            if re.search(self.anywhere, transcript) is None:
                return False
        if self.role is None and self.match is None:
            return True
        candidates = [text for role, text in conversation if self.role in (None, role)]
        if not candidates:
            return False
        return self.match is None or re.search(self.match, candidates[-1]) is not None


class ScriptPolicy(BaseModel):
    """Ordered rules and an optional default reply (format in the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    rules: list[ScriptRule] = []
    default: str | None = None

    def reply_for(self, conversation: list[tuple[str, str]]) -> str | None:
        for index, rule in enumerate(self.rules):
            if rule.matches(conversation):
                log.info("script rule %d (%s) matched", index, rule.name or "unnamed")
                return rule.reply
        log.info("no script rule matched: %s", "default reply" if self.default else "sampling")
        return self.default


def load_script(path: str | Path) -> ScriptPolicy:
    """Read and validate a script file; errors name the file and what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read script {path}: {exc}") from None
    try:
        return ScriptPolicy.model_validate(data)
    except ValueError as exc:
        raise ValueError(f"invalid script {path}: {exc}") from None
