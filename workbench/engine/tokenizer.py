"""The engine's tokenizer: HF `tokenizers` byte-level BPE plus exact per-token byte accounting.

Decoding goes through our own byte table and one incremental UTF-8 decoder, so the text pieces
of a completion (streamed deltas, character offsets for the parsers) always concatenate to the
decoded text, even when a token ends in the middle of a multi-byte character.
"""

import codecs
from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer

TOKENIZER_PATH = Path(__file__).parent / "assets" / "tokenizer.json"
IM_START, IM_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: the printable character standing for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


class EngineTokenizer:
    def __init__(self, path: Path = TOKENIZER_PATH) -> None:
        self._tok = Tokenizer.from_file(str(path))
        self.vocab_size = self._tok.get_vocab_size()
        self.im_start = self._tok.token_to_id(IM_START)
        self.im_end = self._tok.token_to_id(IM_END)
        self.end_of_text = self._tok.token_to_id(END_OF_TEXT)
        self.think_open = self._tok.token_to_id("<think>")
        self.think_close = self._tok.token_to_id("</think>")
        added = self._tok.get_added_tokens_decoder()
        self.special_ids = frozenset(i for i, t in added.items() if t.special)
        byte_of = _byte_decoder()
        vocab = self._tok.get_vocab()
        self._strings = [""] * self.vocab_size
        self._bytes = [b""] * self.vocab_size
        for token, i in vocab.items():
            self._strings[i] = token
            if i in added:
                self._bytes[i] = token.encode("utf-8")
            else:
                self._bytes[i] = bytes(byte_of[c] for c in token)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def token_bytes(self, token_id: int) -> bytes:
        return self._bytes[token_id]

    def pieces(self, ids: list[int], *, skip_special: bool = True) -> list[str]:
        """The text each token adds; a character split across tokens goes to the one ending it."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        out = [
            "" if skip_special and i in self.special_ids else decoder.decode(self._bytes[i])
            for i in ids
        ]
        tail = decoder.decode(b"", final=True)
        if tail:
            out[-1] += tail
        return out

    def decode(self, ids: list[int], *, skip_special: bool = True) -> str:
        return "".join(self.pieces(ids, skip_special=skip_special)) if ids else ""

    @cached_property
    def _display(self) -> list[str]:
        # vLLM's convert_ids_list_to_tokens: decode([id]); the raw vocab string when that is
        # not valid UTF-8 on its own.
        shown = []
        for i in range(self.vocab_size):
            text = self._bytes[i].decode("utf-8", errors="replace")
            shown.append(self._strings[i] if "\ufffd" in text else text)
        return shown

    def token_str(self, token_id: int) -> str:
        """How a token is named in logprob entries."""
        return self._display[token_id]

    def vocab_string(self, token_id: int) -> str:
        return self._strings[token_id]
