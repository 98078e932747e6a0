"""Shared names of the capture layer: dialects, tiers, phases, roles, finding levels."""

from typing import Literal

Dialect = Literal["chat", "responses", "anthropic", "google"]
DIALECTS: tuple[Dialect, ...] = ("chat", "responses", "anthropic", "google")

# What an engine was *measured* to return (never assumed). Only `tokens` is trainable.
Tier = Literal["tokens", "logprobs", "text"]
TIER_RANK: dict[str, int] = {"text": 0, "logprobs": 1, "tokens": 2}

LogprobsMode = Literal["processed_logprobs", "raw_logprobs", "unknown"]

# Set by the workbench from Harbor's trial hooks; the proxy only reports it.
Phase = Literal["queued", "booting", "agent", "verifying", "done"]

Role = Literal["agent", "aux"]

FindingLevel = Literal["FATAL", "WARN", "INFO"]

SCHEMA_ID = "harbor-workbench/rollout/1"
