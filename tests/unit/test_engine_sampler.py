"""vLLM sampler semantics (WIRE.md §4) on hand-made logits."""

import math

import numpy as np
import pytest

from workbench.engine.sampler import Sampler, SamplingParams, kept_mask, log_softmax

LOGITS = np.log(np.array([0.4, 0.3, 0.15, 0.1, 0.05]))


def _sampler(mode="processed_logprobs", seed=0, prompt=(), **params):
    return Sampler(
        SamplingParams(**params), list(prompt), len(LOGITS), np.random.default_rng(seed), mode
    )


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    assert kept_mask(LOGITS, SamplingParams(top_p=0.65)).tolist() == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert kept_mask(LOGITS, SamplingParams(top_p=0.71)).tolist() == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert kept_mask(LOGITS, SamplingParams(top_p=0.01)).tolist() == [
        True,
        False,
        False,
        False,
        False,
    ]


def test_top_k_and_min_p():
    assert kept_mask(LOGITS, SamplingParams(top_k=3)).tolist() == [True, True, True, False, False]
    assert kept_mask(LOGITS, SamplingParams(top_k=-1)).all()
    # min_p 0.3: keep p >= 0.3 * 0.4 = 0.12
    assert kept_mask(LOGITS, SamplingParams(min_p=0.3)).tolist() == [True, True, True, False, False]


def test_processed_logprobs_renormalise_over_the_kept_set():
    token, vector = _sampler(top_p=0.65).step(LOGITS)
    assert token in (0, 1)
    assert np.isneginf(vector[2:]).all()
    assert math.fsum(np.exp(vector[:2])) == pytest.approx(1.0)
    assert vector[0] == pytest.approx(math.log(0.4 / 0.7))


def test_raw_logprobs_ignore_every_transform():
    _, vector = _sampler("raw_logprobs", temperature=0.5, top_k=2, repetition_penalty=2.0).step(
        LOGITS
    )
    assert np.allclose(vector, log_softmax(LOGITS))


def test_temperature_scales_processed_logits():
    _, v1 = _sampler(temperature=1.0).step(LOGITS)
    _, v2 = _sampler(temperature=2.0).step(LOGITS)
    assert (v2[0] - v2[1]) == pytest.approx((v1[0] - v1[1]) / 2)


def test_greedy_takes_argmax_and_ignores_masks():
    sampler = _sampler(temperature=0.0, top_k=1)
    token, vector = sampler.step(LOGITS)
    assert token == 0
    assert np.allclose(vector, log_softmax(LOGITS))  # vLLM all-greedy: no temperature/top-k


def test_penalties_follow_vllm():
    # repetition over prompt tokens: logits < 0 are multiplied by the penalty
    _, vector = _sampler(temperature=0.0, prompt=[0], repetition_penalty=2.0).step(LOGITS)
    expected = LOGITS.copy()
    expected[0] *= 2.0
    assert np.allclose(vector, log_softmax(expected))
    sampler = _sampler(temperature=0.0, frequency_penalty=1.0, presence_penalty=0.5)
    sampler.step(LOGITS, forced=1)
    sampler.step(LOGITS, forced=1)
    _, vector = sampler.step(LOGITS)
    expected = LOGITS.copy()
    expected[1] -= 2 * 1.0 + 0.5
    assert np.allclose(vector, log_softmax(expected))


def test_forced_token_outside_the_kept_set_is_renormalised_with_it():
    token, vector = _sampler(top_k=2).step(LOGITS, forced=4)
    assert token == 4
    assert vector[4] == pytest.approx(math.log(0.05 / (0.4 + 0.3 + 0.05)))
    assert np.isneginf(vector[[2, 3]]).all()


def test_sampling_frequencies_match_the_processed_distribution():
    sampler = _sampler(seed=1, top_p=0.71)
    counts = np.bincount([sampler.step(LOGITS)[0] for _ in range(4000)], minlength=5)
    assert counts[3:].sum() == 0
    assert counts[:3] / 4000 == pytest.approx(np.array([0.4, 0.3, 0.15]) / 0.85, abs=0.03)


def test_min_tokens_masks_stop_ids_then_releases_them():
    params = SamplingParams(temperature=0.0, min_tokens=2)
    sampler = Sampler(
        params, [], len(LOGITS), np.random.default_rng(0), "processed_logprobs", frozenset({0})
    )
    first, vector = sampler.step(LOGITS)
    assert first == 1 and np.isneginf(vector[0])
    assert sampler.step(LOGITS)[0] == 1
    assert sampler.step(LOGITS)[0] == 0  # two tokens out: the stop id is allowed again


def test_logit_bias_is_added_before_penalties():
    params = SamplingParams(temperature=0.0, logit_bias=((4, 10.0),))
    sampler = Sampler(params, [], len(LOGITS), np.random.default_rng(0), "processed_logprobs")
    assert sampler.step(LOGITS)[0] == 4
