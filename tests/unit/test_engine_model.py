"""The numpy LM: prefill agrees with token-by-token decoding, and the whole context matters."""

import numpy as np

from workbench.engine.model import TinyLM

MODEL = TinyLM(4096, 4089)
IDS = np.random.default_rng(0).integers(0, 4000, 700).tolist()


def test_prefill_matches_stepwise_decoding():
    state, logits = MODEL.prefill(IDS)
    stepped, step_logits = MODEL.prefill(IDS[:1])
    for token in IDS[1:]:
        step_logits = MODEL.step(stepped, token)
    assert np.allclose(state.h, stepped.h, atol=1e-3)
    assert np.allclose(logits, step_logits, atol=1e-3)


def test_weights_are_fixed_and_the_first_token_still_matters():
    again = TinyLM(4096, 4089)
    assert np.array_equal(MODEL.prefill(IDS)[1], again.prefill(IDS)[1])
    changed = [IDS[0] + 1, *IDS[1:]]
    assert not np.allclose(MODEL.prefill(IDS)[1], MODEL.prefill(changed)[1], atol=1e-4)
