"""Tokenizers for local models: any Hugging Face tokenizer from a model folder, or a small byte-level
BPE trained with `tokenizers` on our own corpus with Qwen3's special tokens.

The small BPE is for tiny models: same chat layout, same special tokens (each one token, never split),
exact round trip (byte-level, digits split one by one so ids are copied digit by digit). `<|im_end|>`
is the end-of-turn (eos) token and `<|endoftext|>` the padding token, as in Qwen3.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from rl.chat.format import END_OF_TEXT, IM_END, SPECIAL_TOKENS


def train_bpe(texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2,
              extra_tokens: Sequence[str] = ()) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts`; special tokens get the first ids, then `extra_tokens` (e.g. a
    view's reference tokens, rl/chat/views.py), each also one token that is never split."""
    specials = list(SPECIAL_TOKENS) + [t for t in extra_tokens if t not in SPECIAL_TOKENS]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(_strip_specials(texts, specials), trainer=trainer)
    return wrap(tok, specials)


def wrap(tok: Tokenizer, specials: Sequence[str] = SPECIAL_TOKENS) -> PreTrainedTokenizerFast:
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=END_OF_TEXT, clean_up_tokenization_spaces=False,
        additional_special_tokens=[t for t in specials if t not in (IM_END, END_OF_TEXT)],
    )
    fast.padding_side = "left"
    return fast


def _strip_specials(texts: Iterable[str], specials: Sequence[str]) -> Iterable[str]:
    # Special tokens are added whole; keep their text out of the merges.
    for text in texts:
        for s in specials:
            text = text.replace(s, "\n")
        yield text


def load_tokenizer(folder: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved in a model folder (a real Qwen3 checkpoint or one of our tiny models)."""
    tok = AutoTokenizer.from_pretrained(str(folder))
    missing = [s for s in SPECIAL_TOKENS if s != END_OF_TEXT and len(tok.encode(s, add_special_tokens=False)) != 1]
    if missing:
        raise ValueError(f"tokenizer in {folder} does not have the chat tokens {missing} as single tokens")
    if tok.pad_token is None:
        tok.pad_token = END_OF_TEXT if END_OF_TEXT in tok.get_vocab() else tok.eos_token
    tok.padding_side = "left"
    return tok


def ordinary_ids(tok: PreTrainedTokenizerBase) -> list[int]:
    """Every id but the special ones (chat template, tool markup, reserved), wherever a tokenizer puts
    them (ours first, a Qwen tokenizer last): the ids noise may insert."""
    special = set(tok.all_special_ids)
    return [i for i in range(len(tok)) if i not in special]


def encode(tok: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def decode(tok: PreTrainedTokenizerBase, ids: list[int]) -> str:
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
