"""Build tiny random-weight llama models that ``mlx_lm`` loads offline. Run it with the mlx venv's python.

    python make_tiny_mlx_model.py --out-root DIR --model tiny-a:64:2 --model tiny-b:96:2 [--vocab 2000] [--seed 0]

For each ``NAME:HIDDEN[:LAYERS]`` it writes ``DIR/NAME/`` with:

* a byte-level BPE tokenizer (trained once, offline, with ``tokenizers`` on this Python's standard-library
  sources, shared by all models) saved through ``PreTrainedTokenizerFast`` with ``<s>``/``</s>``/``<pad>`` and a
  system/user/assistant chat template, so ``/v1/chat/completions`` works;
* ``config.json`` for mlx_lm's ``llama`` (4 heads, 2 KV heads, untied lm_head);
* ``model.safetensors``: ``mlx_lm.models.llama.Model`` randomly initialised, saved with ``mx.save_safetensors``
  under the parameter names mlx_lm loads. The lm_head rows of the special tokens, of byte tokens that do not
  decode to valid UTF-8 alone and of tokens with control characters other than newline/tab are zeroed: with
  greedy decoding (the server default) their logit is 0 while ~2000 random logits compete, so the model never
  stops early and every generated piece is printable text.
  Every request therefore generates exactly ``max_tokens`` tokens.

The last stdout line is a JSON summary. Only the standard library, mlx, mlx_lm, tokenizers and transformers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script with another venv's python: the shared tokenizer code is found through tests/ on sys.path.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from e2e_support.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, corpus_files
from e2e_support.tokenizer import train_tokenizer as _train

CORPUS_FILES = 80  # stdlib modules to train on: enough for a 2000-token vocab, a few seconds of training
MAX_POSITIONS = 16384


def train_tokenizer(vocab: int) -> Any:
    return _train(vocab, CORPUS_FILES)


def suppressed_ids(tok: Any) -> list[int]:
    """Token ids the model must never pick: specials, pieces that are not valid UTF-8 on their own, and
    pieces with control characters other than newline and tab (they would garble DEBUG token log lines)."""
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    for i in range(tok.get_vocab_size()):
        text = tok.decode([i], skip_special_tokens=False)
        if i not in ids and ("\ufffd" in text or any(c not in "\n\t" and (c < " " or c == "\x7f") for c in text)):
            ids.append(i)
    return sorted(ids)


def build_model(out: Path, tok: Any, hidden: int, layers: int, seed: int) -> dict[str, Any]:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models.llama import Model, ModelArgs
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   chat_template=CHAT_TEMPLATE, model_max_length=MAX_POSITIONS)
    fast.save_pretrained(str(out))
    vocab = tok.get_vocab_size()
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab,
        "max_position_embeddings": MAX_POSITIONS,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": tok.token_to_id("<s>"),
        "eos_token_id": tok.token_to_id("</s>"),
        "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))

    mx.random.seed(seed)
    model = Model(ModelArgs.from_dict(config))
    weights = dict(tree_flatten(model.parameters()))
    banned = suppressed_ids(tok)
    keep = mx.ones((vocab, 1), dtype=mx.float32)
    keep[mx.array(banned)] = 0.0
    weights["lm_head.weight"] = weights["lm_head.weight"] * keep
    mx.eval(weights)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    return {
        "path": str(out),
        "hidden": hidden,
        "layers": layers,
        "vocab": vocab,
        "params": int(sum(v.size for v in weights.values())),
        "suppressed_tokens": len(banned),
        "bytes": (out / "model.safetensors").stat().st_size,
    }


def parse_spec(spec: str) -> tuple[str, int, int]:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise argparse.ArgumentTypeError(f"expected NAME:HIDDEN[:LAYERS], got {spec!r}")
    return parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-root", type=Path, required=True)
    ap.add_argument("--model", type=parse_spec, action="append", required=True, help="NAME:HIDDEN[:LAYERS]")
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    tok = train_tokenizer(args.vocab)
    t_tok = time.monotonic() - t0
    built = [build_model(args.out_root / name, tok, hidden, layers, args.seed + i)
             for i, (name, hidden, layers) in enumerate(args.model)]
    summary = {"models": built, "tokenizer_seconds": round(t_tok, 2),
               "total_seconds": round(time.monotonic() - t0, 2), "corpus_files": len(corpus_files(CORPUS_FILES))}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
