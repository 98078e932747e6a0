"""Train the reference engine's byte-level BPE tokenizer from `assets/corpus.txt`.

    python -m workbench.engine.train_tokenizer        # rewrites assets/tokenizer.json

The committed `tokenizer.json` is the output of this script; retrain only together with a new
corpus, since every captured token id depends on it. Two choices matter for capture:

- every newline is its own pre-token, so whatever follows a newline is tokenized independently
  of what precedes it. The chat template ends each header with "\\n", which makes an assistant
  reply's canonical ids identical whether it is encoded alone or inside the next prompt (the
  prefix property the rollout graph relies on);
- ChatML, tool and reasoning markers are added tokens, so they are single ids wherever they
  appear. Only the three ChatML control tokens are "special" (dropped when decoding with
  `skip_special_tokens`); the tool and think markers stay in decoded text, as in Qwen.
"""

from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ASSETS = Path(__file__).parent / "assets"
VOCAB_SIZE = 4096
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MARKERS = (
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<tool_response>",
    "</tool_response>",
)


def build_tokenizer(corpus: str) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL) - len(MARKERS),
        min_frequency=1,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus.splitlines(keepends=True), trainer=trainer)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKERS])
    return tokenizer


def main() -> None:
    corpus = (ASSETS / "corpus.txt").read_text(encoding="utf-8")
    tokenizer = build_tokenizer(corpus)
    tokenizer.save(str(ASSETS / "tokenizer.json"))
    print(f"vocab size {tokenizer.get_vocab_size()} -> {ASSETS / 'tokenizer.json'}")


if __name__ == "__main__":
    main()
