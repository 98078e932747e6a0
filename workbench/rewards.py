"""Rewards: the verifier's dict verbatim, one scalar chosen by a fixed rule, and where it came from.

The rule (DESIGN.md §8): the only key; else the key `reward`; else the caller's `reward_key`;
else no scalar and the rollout is `reward_ambiguous`. A verifier that never ran gives `None`,
never 0: a dead sandbox must not look like a wrong answer.
"""

import math
from dataclasses import dataclass
from pathlib import Path

# Harbor's verifier reads reward.json first and falls back to reward.txt (verifier.py:197-310).
REWARD_FILES = ("verifier/reward.json", "verifier/reward.txt")


@dataclass(frozen=True)
class RewardSelection:
    """The scalar picked from a rewards dict; `problem` says why there is none."""

    reward: float | None
    key: str | None
    problem: str | None = None


def select_reward(
    rewards: dict[str, float | int] | None, reward_key: str | None
) -> RewardSelection:
    """Pick the scalar reward. `rewards=None` (never graded) gives `reward=None` and no problem."""
    if rewards is None:
        return RewardSelection(reward=None, key=None)
    if not rewards:
        return RewardSelection(None, None, "the verifier wrote an empty rewards dict")
    if len(rewards) == 1:
        key = next(iter(rewards))
    elif "reward" in rewards:
        key = "reward"
    elif reward_key is not None and reward_key in rewards:
        key = reward_key
    else:
        keys = ", ".join(sorted(rewards))
        wanted = (
            f"reward_key {reward_key!r} is not among them"
            if reward_key is not None
            else "pass reward_key to choose one"
        )
        return RewardSelection(None, None, f"rewards have several keys ({keys}); {wanted}")
    value = float(rewards[key])
    if not math.isfinite(value):
        return RewardSelection(None, key, f"reward {key!r} is not finite ({value})")
    return RewardSelection(reward=value, key=key)


def reward_provenance(trial_dir: Path) -> str | None:
    """Which file the verifier's rewards came from, relative to the trial dir (None if neither)."""
    for name in REWARD_FILES:
        if (trial_dir / name).is_file():
            return name
    return None
