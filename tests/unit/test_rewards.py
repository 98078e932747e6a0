"""The scalar reward rule (DESIGN.md §8) and reward provenance."""

import pytest

from workbench.rewards import reward_provenance, select_reward


def test_the_only_key_is_the_reward_whatever_its_name():
    assert select_reward({"accuracy": 0.5}, None).reward == 0.5
    assert select_reward({"accuracy": 0.5}, None).key == "accuracy"


def test_key_reward_wins_among_several():
    chosen = select_reward({"reward": 1, "file_ok": 0}, None)
    assert (chosen.reward, chosen.key, chosen.problem) == (1.0, "reward", None)


def test_reward_key_given_by_the_caller_picks_among_several():
    chosen = select_reward({"passed": 1.0, "style": 0.25}, "style")
    assert (chosen.reward, chosen.key) == (0.25, "style")


def test_two_keys_and_no_reward_key_is_ambiguous():
    chosen = select_reward({"passed": 1.0, "style": 0.25}, None)
    assert chosen.reward is None
    assert "passed, style" in chosen.problem and "reward_key" in chosen.problem


def test_unknown_reward_key_is_ambiguous_and_says_so():
    chosen = select_reward({"passed": 1.0, "style": 0.25}, "speed")
    assert chosen.reward is None and "'speed'" in chosen.problem


def test_verifier_never_ran_is_none_never_zero():
    chosen = select_reward(None, "reward")
    assert chosen.reward is None and chosen.problem is None


def test_empty_dict_is_a_problem_not_zero():
    chosen = select_reward({}, None)
    assert chosen.reward is None and chosen.problem


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_reward_is_refused(value):
    assert select_reward({"reward": value}, None).reward is None


def test_provenance_prefers_reward_json_like_harbor(tmp_path):
    assert reward_provenance(tmp_path) is None
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "reward.txt").write_text("1.0")
    assert reward_provenance(tmp_path) == "verifier/reward.txt"
    (tmp_path / "verifier" / "reward.json").write_text('{"reward": 1.0}')
    assert reward_provenance(tmp_path) == "verifier/reward.json"
