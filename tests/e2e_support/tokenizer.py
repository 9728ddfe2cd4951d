"""The offline byte-level BPE tokenizer both tiny-model builders train (on this Python's standard library).

The builders run with another venv's python (mlx's, vLLM's) and import this by path: standard library and
``tokenizers`` only, imported lazily.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>"
    "{% elif message['role'] == 'user' %}<|user|>"
    "{% else %}<|assistant|>{% endif %}"
    "{{ message['content'] }}{{ eos_token }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def corpus_files(count: int) -> list[Path]:
    """The first ``count`` standard-library modules (sorted by name): the training text."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(stdlib.glob("*.py"))[:count]


def corpus(count: int) -> Iterator[str]:
    for path in corpus_files(count):
        yield path.read_text(encoding="utf-8", errors="ignore")


def train_tokenizer(vocab: int, corpus_count: int) -> Any:
    """A ``tokenizers.Tokenizer``: byte-level BPE with :data:`SPECIAL_TOKENS`, trained on ``corpus_count`` files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(corpus_count), trainer=trainer)
    return tok
