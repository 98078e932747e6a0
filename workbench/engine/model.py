"""A small causal LM in numpy with fixed-seed random weights.

Not trained: it exists so every token has a real, context-dependent distribution over the whole
vocabulary. State after t tokens:
- `h`: a bank of leaky integrators, h_t = a ⊙ h_{t-1} + U[x_t], with decays spread from 0.5 to
  0.999 (fast and slow memory);
- `c`: the running sum of another projection of every token, read as c_t / sqrt(t), so the very
  first token still moves the distribution at any length.
The next-token logits are W2 · tanh(W1 · [h·norm, c/√t, V[x_t]] + b1) + bias. Decoding one token
is O(1) (two small matrix-vector products); prefill is a chunked vectorised scan of the prompt.
"""

from dataclasses import dataclass

import numpy as np

_CHUNK = 256
WEIGHT_SEED = 20261130  # the "checkpoint": fixed, independent of the engine's sampling seed


@dataclass
class LMState:
    h: np.ndarray
    c: np.ndarray
    length: int
    last: int


class TinyLM:
    def __init__(
        self, vocab_size: int, eos_id: int, *, dim: int = 192, mean_dim: int = 64, hidden: int = 256
    ) -> None:
        rng = np.random.default_rng(WEIGHT_SEED)
        f32 = np.float32
        self.vocab_size = vocab_size
        self.decay = (1.0 - np.geomspace(0.5, 1e-3, dim)).astype(f32)
        # Steady-state variance of h_i is 1/(1-a_i^2); rescale so every unit reads at ~unit scale.
        self._powers = self.decay[None, :] ** np.arange(_CHUNK + 1, dtype=f32)[:, None]  # a^k
        self._norm = np.sqrt(1.0 - self.decay.astype(np.float64) ** 2).astype(f32)
        self.U = rng.standard_normal((vocab_size, dim), dtype=f32)
        self.C = rng.standard_normal((vocab_size, mean_dim), dtype=f32)
        self.E = rng.standard_normal((vocab_size, 64), dtype=f32)
        fan_in = dim + mean_dim + 64
        self.W1 = (
            rng.standard_normal((hidden, fan_in), dtype=f32) * (1.5 / np.sqrt(fan_in))
        ).astype(f32)
        self.b1 = (rng.standard_normal(hidden, dtype=f32) * 0.1).astype(f32)
        self.W2 = (
            rng.standard_normal((vocab_size, hidden), dtype=f32) * (3.0 / np.sqrt(hidden))
        ).astype(f32)
        self.bias = (rng.standard_normal(vocab_size, dtype=f32) * 0.5).astype(f32)
        # End-of-turn gets a few percent of the mass on average, so sampled replies end.
        self.bias[eos_id] += 6.5

    def _logits(self, state: LMState) -> np.ndarray:
        feats = np.concatenate(
            (state.h * self._norm, state.c / np.sqrt(state.length), self.E[state.last])
        )
        # einsum, not `@`: BLAS gemv spawns threads, which on a shared 2-core box made one token
        # 60x slower (9 ms vs 0.15 ms); einsum's own loops are single-threaded and give the same
        # bits whatever the machine's thread count, so logprobs are reproducible too.
        hidden = np.tanh(np.einsum("hf,f->h", self.W1, feats) + self.b1)
        return np.einsum("vh,h->v", self.W2, hidden) + self.bias

    def prefill(self, ids: list[int]) -> tuple[LMState, np.ndarray]:
        """State after the prompt and the logits of the next token (the prompt must be non-empty)."""
        tokens = np.asarray(ids, dtype=np.int64)
        # Chunked scan: over a chunk of m tokens, h <- a^m h + Σ_s a^(m-1-s) U[x_s]; the powers
        # come from one table, so the whole prompt costs O(n·dim) multiply-adds and no pow().
        h = np.zeros_like(self.decay)
        for start in range(0, len(tokens), _CHUNK):
            chunk = tokens[start : start + _CHUNK]
            m = len(chunk)
            weights = self._powers[m - 1 :: -1]  # a^(m-1) ... a^0
            h = self._powers[m] * h + np.einsum("td,td->d", weights, self.U[chunk])
        state = LMState(h=h, c=self.C[tokens].sum(axis=0), length=len(tokens), last=int(tokens[-1]))
        return state, self._logits(state)

    def step(self, state: LMState, token: int) -> np.ndarray:
        """Consume one token (in place) and return the next token's logits."""
        state.h *= self.decay
        state.h += self.U[token]
        state.c += self.C[token]
        state.length += 1
        state.last = token
        return self._logits(state)
