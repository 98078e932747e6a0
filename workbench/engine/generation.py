"""One request's generation: prefill, then sample (or follow a script) token by token.

`Engine` owns the tokenizer, the template, the model and the scripted policy; the HTTP layer
(`server.py`) turns requests into `GenerationRequest`s and `Completion`s into vLLM's shapes.
"""

import codecs
import threading
from dataclasses import dataclass, field

import numpy as np

from workbench.engine.config import EngineConfig
from workbench.engine.model import TinyLM
from workbench.engine.sampler import Sampler, SamplingParams
from workbench.engine.script import ScriptPolicy, load_script
from workbench.engine.template import ChatTemplate, Message, ToolCallText
from workbench.engine.tokenizer import EngineTokenizer
from workbench.engine.toolparse import parse_output


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    max_tokens: int
    params: SamplingParams = field(default_factory=SamplingParams)
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    skip_special: bool = True
    include_stop_str: bool = False
    top_n: int | None = None  # None: no logprobs; 0: chosen token only; -1: whole vocabulary
    forced: list[int] | None = None  # scripted ids to emit instead of sampling


@dataclass
class TokenLogprob:
    logprob: float
    top: list[tuple[int, float]]  # engine order: the chosen token first, then the top-k


@dataclass
class Completion:
    token_ids: list[int]
    pieces: list[str]  # text added by each token; concatenates to `text`
    text: str
    logprobs: list[TokenLogprob] | None
    finish_reason: str
    stop_reason: int | str | None


def _top(vector: np.ndarray, token: int, top_n: int) -> TokenLogprob:
    chosen = (token, float(vector[token]))
    k = len(vector) if top_n == -1 else min(top_n, len(vector))
    if k == 0:
        return TokenLogprob(chosen[1], [chosen])
    idx = np.argpartition(-vector, k - 1)[:k] if k < len(vector) else np.arange(len(vector))
    idx = idx[np.lexsort((idx, -vector[idx]))]
    return TokenLogprob(
        chosen[1], [chosen, *((int(i), float(vector[i])) for i in idx if i != token)]
    )


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.tokenizer = EngineTokenizer()
        self.template = ChatTemplate()
        self.model = TinyLM(self.tokenizer.vocab_size, self.tokenizer.im_end)
        script = config.script
        if script is not None and not isinstance(script, ScriptPolicy):
            script = load_script(script)
        self.script: ScriptPolicy | None = script
        self.eos_ids = frozenset({self.tokenizer.im_end, self.tokenizer.end_of_text})
        self._seeds = np.random.default_rng(config.seed)
        self._seed_lock = threading.Lock()

    @property
    def policy(self) -> str:
        return "scripted" if self.script is not None else "sampled"

    def render_chat(
        self,
        messages: list[Message],
        tools: list[dict] | None,
        *,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> list[int]:
        text = self.template.render(
            messages,
            tools,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
        )
        return self.tokenizer.encode(text)

    def scripted_ids(self, messages: list[Message]) -> list[int] | None:
        """Canonical ids of the script's reply to this conversation (+ <|im_end|>), or None."""
        if self.script is None:
            return None
        reply = self.script.reply_for([(m.role, m.content) for m in messages])
        if reply is None:
            return None
        parsed = parse_output(reply, tools=True)
        canonical = Message(
            role="assistant",
            content=parsed.content or "",
            reasoning=parsed.reasoning,
            tool_calls=[
                ToolCallText(c["function"]["name"], c["function"]["arguments"])
                for c in parsed.tool_calls
            ],
        )
        return [
            *self.tokenizer.encode(self.template.assistant_text(canonical)),
            self.tokenizer.im_end,
        ]

    def _rng(self, seed: int | None) -> np.random.Generator:
        if seed is None:
            with self._seed_lock:
                seed = int(self._seeds.integers(2**63))
        # vLLM takes any int seed; numpy only non-negative ones: map into [0, 2**64).
        return np.random.default_rng(seed % 2**64)

    def generate(self, req: GenerationRequest) -> Completion:
        tok = self.tokenizer
        stop_ids = frozenset(req.stop_token_ids) | (frozenset() if req.ignore_eos else self.eos_ids)
        sampler = Sampler(
            req.params,
            req.prompt_ids,
            tok.vocab_size,
            self._rng(req.seed),
            self.config.logprobs_mode,
            stop_ids,
        )
        state, logits = self.model.prefill(req.prompt_ids)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        ids: list[int] = []
        pieces: list[str] = []
        logprobs: list[TokenLogprob] | None = [] if req.top_n is not None else None
        text = ""
        finish, stop_reason = "length", None
        longest_stop = max((len(s) for s in req.stop), default=0)
        for i in range(req.max_tokens):
            forced = req.forced[i] if req.forced is not None and i < len(req.forced) else None
            token, vector = sampler.step(logits, forced)
            ids.append(token)
            if logprobs is not None:
                logprobs.append(_top(vector, token, req.top_n))
            skip = req.skip_special and token in tok.special_ids
            piece = "" if skip else decoder.decode(tok.token_bytes(token))
            pieces.append(piece)
            text += piece
            if token in self.eos_ids and not req.ignore_eos:
                finish = "stop"
                break
            if token in req.stop_token_ids:
                finish, stop_reason = "stop", token
                break
            if piece and req.stop:
                window = max(0, len(text) - len(piece) - longest_stop + 1)
                hits = [(text.find(s, window), s) for s in req.stop]
                hits = [(at, s) for at, s in hits if at != -1]
                if hits:
                    at, s = min(hits)
                    text = text[: at + len(s)] if req.include_stop_str else text[:at]
                    finish, stop_reason = "stop", s
                    break
            if i + 1 < req.max_tokens:
                logits = self.model.step(state, token)
        tail = decoder.decode(b"", final=True)
        if tail and not isinstance(stop_reason, str):
            pieces[-1] += tail
            text += tail
        return Completion(ids, _fit(pieces, len(text)), text, logprobs, finish, stop_reason)


def _fit(pieces: list[str], length: int) -> list[str]:
    """Cut per-token pieces so they concatenate to the first `length` characters."""
    out, used = [], 0
    for piece in pieces:
        keep = piece[: max(0, length - used)]
        out.append(keep)
        used += len(keep)
    return out
