"""Reference engine speed on one core: decode tokens/s and prefill time for 1k and 8k prompts.

    python bench/engine.py

Budget (DESIGN.md, engine issue): decode >= 200 tokens/s, 8k-token prefill <= 0.5 s. Measures the
engine's own generation path (model + sampler + logprobs), not HTTP.
"""

import os
import time

import numpy as np

from workbench.engine.config import EngineConfig
from workbench.engine.generation import Engine, GenerationRequest
from workbench.engine.sampler import SamplingParams
from workbench.engine.template import normalize_messages

DECODE_BUDGET = 200.0  # tokens/s
PREFILL_BUDGET = 0.5  # s for 8k tokens


def _best(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    engine = Engine(EngineConfig())
    rng = np.random.default_rng(0)
    vocab = engine.tokenizer.vocab_size - 10  # ordinary tokens only
    prompts = {n: rng.integers(0, vocab, n).tolist() for n in (1024, 8192)}
    print("reference engine, one core")
    for n, ids in prompts.items():
        t = _best(lambda ids=ids: engine.model.prefill(ids))
        budget = (
            f"  (budget {PREFILL_BUDGET:.2f} s, {t / PREFILL_BUDGET:.2f}x of it)"
            if n == 8192
            else ""
        )
        print(f"prefill {n:>5} tokens: {t * 1000:7.1f} ms{budget}")
    text = engine.tokenizer.decode(prompts[8192])
    n_text = len(engine.tokenizer.encode(text))
    t = _best(lambda: engine.tokenizer.encode(text))
    print(f"tokenize {n_text:>5}-token text: {t * 1000:7.1f} ms (part of every chat request)")
    messages = normalize_messages([{"role": "user", "content": text}])

    def first_token() -> None:
        ids = engine.render_chat(messages, None)
        engine.generate(GenerationRequest(ids, 1, seed=0, top_n=0))

    t = _best(first_token)
    print(f"chat request to its first token ({n_text}-token prompt): {t * 1000:7.1f} ms")
    for label, params, top_n in (
        ("greedy, no logprobs", SamplingParams(temperature=0.0), None),
        ("T=1 top_p=0.9, logprobs", SamplingParams(top_p=0.9), 0),
        ("T=0.7 top_k=50, top_logprobs=5", SamplingParams(temperature=0.7, top_k=50), 5),
    ):
        for n, ids in prompts.items():
            steps = 256
            req = GenerationRequest(ids, steps, params=params, seed=1, ignore_eos=True, top_n=top_n)
            prefill = _best(lambda ids=ids: engine.model.prefill(ids), repeats=1)
            total = _best(lambda req=req: engine.generate(req), repeats=2)
            rate = steps / max(total - prefill, 1e-9)
            print(
                f"decode {label:<32} after {n:>5}-token prompt: {rate:7.0f} tokens/s "
                f"({rate / DECODE_BUDGET:.1f}x the {DECODE_BUDGET:.0f} tokens/s budget)"
            )


if __name__ == "__main__":
    main()
