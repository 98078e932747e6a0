"""Graph ingest: is it linear in turns, and how many bytes does it keep per unique token?

Synthetic agentic rollouts of N = 250, 500, 1,000 and 2,000 turns, built before timing:
- a main agent (1,500-token system+tools prefix) whose prompt grows by each completion
  (80-250 tokens) and tool result (50-400 tokens) up to 8k tokens, then compacts: a new root
  with the same prefix and a 300-token summary;
- two subagent roots (own 800-token prefix, tools on), started at N/4 and N/2, each making
  N/20 calls interleaved with the main agent;
- 10 % of calls are retried (identical prompt, new completion; the first is discarded);
- each request carries its full message history as fresh dicts (as parsed from JSON), plus
  per-call sampling, usage and timing dicts, like the proxy's turns.

Printed per N: ingest CPU seconds (process time, as the machine is shared; best of 7 rounds
with the sizes interleaved), time(N)/time(N/2), and the bytes the graph retains per unique token
(prompt deltas + completions), measured with tracemalloc after the caller has dropped its
turns: ids, logprobs, index, per-turn metadata and message deltas all count.
Budgets (DESIGN.md §10): ratio <= 2.2, 1,000 turns < 1 s, <= 12 bytes per unique token.

    .venv/bin/python bench/graph_ingest.py
"""

import gc
import time
import tracemalloc

import numpy as np

from capture.graph import RolloutGraph
from capture.turns import Turn

MAX_PROMPT = 8192
VOCAB = 151_000


class Conversation:
    """One agent's context: a token stream plus the message history that renders it."""

    def __init__(self, rng: np.random.Generator, prefix: np.ndarray, tag: str):
        self.rng, self.prefix, self.tag = rng, prefix, tag
        self.restart(summary=0)

    def restart(self, summary: int) -> None:
        self.tokens = np.concatenate([self.prefix, self.fresh(summary)]) if summary else self.prefix
        self.messages = [{"role": "system", "content": self.tag}, {"role": "user", "content": "go"}]

    def fresh(self, n: int) -> np.ndarray:
        return self.rng.integers(0, VOCAB, n, dtype=np.int32)

    def call(self, n_turn: int) -> Turn:
        n = int(self.rng.integers(80, 251))
        completion = self.fresh(n)
        return Turn(
            prompt_ids=self.tokens,
            completion_ids=completion,
            completion_logprobs=-self.rng.random(n, dtype=np.float32),
            has_tools=True,
            messages=[dict(m) for m in self.messages],  # every request is parsed anew
            tool_calls=[
                {
                    "id": f"c{n_turn}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                }
            ],
            finish_reason="tool_calls",
            sampling_requested={"temperature": 1.0, "top_p": 0.95},
            sampling_applied={"temperature": 1.0, "top_p": 1.0},
            usage={"prompt_tokens": len(self.tokens), "completion_tokens": n},
            timings={"received_at": 1.7e9 + n_turn, "upstream_ms": 12.5},
            engine="http://127.0.0.1:8000",
            model="workbench-ref",
        )

    def advance(self, turn: Turn, n_turn: int) -> None:
        """The harness runs the tool and sends the next request (or compacts)."""
        result = self.fresh(int(self.rng.integers(50, 401)))
        self.tokens = np.concatenate([self.tokens, turn.completion_ids, result])
        self.messages += [
            {"role": "assistant", "content": None, "tool_calls": turn.tool_calls},
            {"role": "tool", "tool_call_id": f"c{n_turn}", "content": f"output {n_turn}"},
        ]
        if len(self.tokens) > MAX_PROMPT:
            self.restart(summary=300)


def rollout(n: int, seed: int = 0) -> list[Turn]:
    rng = np.random.default_rng(seed)
    main = Conversation(rng, rng.integers(0, VOCAB, 1500, dtype=np.int32), "main")
    subs = [
        Conversation(rng, rng.integers(0, VOCAB, 800, dtype=np.int32), f"sub{k}") for k in (0, 1)
    ]
    starts = [n // 4, n // 2]
    turns: list[Turn] = []
    while len(turns) < n:
        i = len(turns)
        active = [s for s, start in zip(subs, starts, strict=True) if start <= i < start + n // 10]
        conv = active[0] if active and i % 2 else main  # subagents interleave with the main agent
        turn = conv.call(i)
        turns.append(turn)
        if rng.random() < 0.1 and len(turns) < n:  # retry: same prompt, new sample
            turn = conv.call(i)
            turns.append(turn)
        conv.advance(turn, i)
    return turns[:n]


def ingest_seconds(rollouts: dict[int, list[Turn]], rounds: int = 7) -> dict[int, float]:
    """Best time per size; sizes are interleaved in every round so load changes hit all."""
    best = dict.fromkeys(rollouts, float("inf"))
    for _ in range(rounds):
        for n, turns in rollouts.items():
            graph = RolloutGraph()
            gc.collect()
            start = time.process_time()
            for turn in turns:
                graph.add(turn)
            best[n] = min(best[n], time.process_time() - start)
    return best


def retained_bytes(n: int) -> tuple[int, dict[str, int]]:
    """Bytes still allocated once the caller dropped its turns: what the graph keeps."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    turns = rollout(n)
    graph = RolloutGraph()
    for turn in turns:
        graph.add(turn)
    del turns, turn
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return kept, graph.counters()


def main() -> None:
    sizes = (250, 500, 1000, 2000)
    rollouts = {n: rollout(n) for n in sizes}
    gc.freeze()  # the caller's pre-built turns are not the graph's cost: keep GC off them
    seconds = ingest_seconds(rollouts)
    del rollouts
    gc.unfreeze()
    print(f"{'turns':>6} {'unique tok':>11} {'cpu s':>8} {'t(N)/t(N/2)':>12} {'B/unique tok':>13}")
    for n in sizes:
        kept, counters = retained_bytes(n)
        ratio = f"{seconds[n] / seconds[n // 2]:.2f}" if n // 2 in seconds else "-"
        unique = counters["unique_tokens"]
        print(f"{n:>6} {unique:>11,} {seconds[n]:>8.3f} {ratio:>12} {kept / unique:>13.2f}")
    print(
        "budgets: t(2N)/t(N) <= 2.2, 1,000 turns < 1 s, <= 12 bytes per unique token "
        f"(2,000 turns: {counters['discarded']} discarded, {counters['roots']} live roots)"
    )


if __name__ == "__main__":
    main()
