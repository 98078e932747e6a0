"""vLLM's sampler for one sequence (WIRE.md §4.1), returning the logprobs of the chosen mode.

Order: raw log-softmax → min_tokens (stop ids masked until reached) and logit_bias → penalties (repetition over prompt+output, frequency and presence over
output) → greedy (T < 1e-5: processed = log_softmax of the penalised logits, nothing else) or
temperature → min_p → top_k → top_p, masked tokens at -inf and the rest renormalised.

A forced token (scripted policy) that the min_p/top_k/top_p masks removed is put back into the
kept set before renormalising, so its processed logprob is finite: it is the log of its
probability among {kept set} ∪ {forced token}, and the alternatives are reported from that same
distribution.
"""

from dataclasses import dataclass
from typing import Literal

import numpy as np

_GREEDY_T = 1e-5


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: off
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    min_tokens: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature < _GREEDY_T


def log_softmax(x: np.ndarray) -> np.ndarray:
    finite_max = np.max(x)
    shifted = x - finite_max
    return shifted - np.log(np.sum(np.exp(shifted)))


def kept_mask(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    """Tokens surviving min_p, top_k and top_p on temperature-scaled logits (vLLM semantics)."""
    x = logits.copy()
    if params.min_p > 0:
        probs = np.exp(log_softmax(x))
        x[probs < params.min_p * probs.max()] = -np.inf
    top_k = params.top_k if 0 < params.top_k < len(x) else 0
    if top_k or params.top_p < 1.0:
        order = np.argsort(x, kind="stable")  # ascending, like apply_top_k_top_p_pytorch
        x_sorted = x[order]
        if top_k:
            x_sorted[x_sorted < x_sorted[len(x) - top_k]] = -np.inf
        if params.top_p < 1.0:
            cumulative = np.cumsum(np.exp(log_softmax(x_sorted)))
            drop = cumulative <= 1.0 - params.top_p
            drop[-1] = False
            x_sorted[drop] = -np.inf
        x[order] = x_sorted
    return np.isfinite(x)


class Sampler:
    """Per-request sampling state: penalty counts and the generator."""

    def __init__(
        self,
        params: SamplingParams,
        prompt_ids: list[int],
        vocab_size: int,
        rng: np.random.Generator,
        mode: Literal["processed_logprobs", "raw_logprobs"],
        stop_ids: frozenset[int] = frozenset(),
    ) -> None:
        self.params = params
        self.rng = rng
        self.mode = mode
        self.counts = np.zeros(vocab_size, dtype=np.int64)
        self.seen = np.zeros(vocab_size, dtype=bool)
        self.seen[np.asarray(prompt_ids, dtype=np.int64)] = True
        self.stop_ids = np.asarray(sorted(stop_ids), dtype=np.int64)
        self.emitted = 0

    def _penalised(self, logits: np.ndarray) -> np.ndarray:
        p = self.params
        x = logits
        if self.emitted < p.min_tokens and len(self.stop_ids):
            x = x.copy()
            x[self.stop_ids] = -np.inf
        if p.logit_bias:
            x = x.copy()
            for token, bias in p.logit_bias:
                x[token] += bias
        if p.repetition_penalty != 1.0:
            scaled = np.where(x > 0, x / p.repetition_penalty, x * p.repetition_penalty)
            x = np.where(self.seen, scaled, x)
        if p.frequency_penalty:
            x = x - p.frequency_penalty * self.counts
        if p.presence_penalty:
            x = x - p.presence_penalty * (self.counts > 0)
        return x

    def step(self, logits: np.ndarray, forced: int | None = None) -> tuple[int, np.ndarray]:
        """Choose the next token (or accept `forced`); return it and the mode's logprob vector."""
        logits = logits.astype(np.float64)
        x = self._penalised(logits)
        if self.params.greedy:
            processed = log_softmax(x)
            token = int(np.argmax(x)) if forced is None else forced
        else:
            x = x / self.params.temperature
            keep = kept_mask(x, self.params)
            if forced is not None:
                keep[forced] = True
            processed = log_softmax(np.where(keep, x, -np.inf))
            if forced is None:
                cdf = np.cumsum(np.exp(processed))
                token = int(np.searchsorted(cdf, self.rng.random() * cdf[-1], side="right"))
                token = min(token, len(cdf) - 1)
                while not keep[token]:  # float edge at the top of the CDF
                    token -= 1
            else:
                token = forced
        self.counts[token] += 1
        self.seen[token] = True
        self.emitted += 1
        vector = processed if self.mode == "processed_logprobs" else log_softmax(logits)
        return token, vector
