"""Write a tiny random-weight Llama that vLLM serves offline. Run it with the vLLM venv's python.

    python make_tiny_vllm_model.py --out DIR [--hidden 256] [--layers 2] [--heads 4] [--vocab 2048] [--seed 0]

``DIR`` gets:

* a byte-level BPE tokenizer trained here, offline, with ``tokenizers`` on this Python's standard-library
  sources, saved through ``PreTrainedTokenizerFast`` with ``<s>``/``</s>``/``<pad>`` and a
  system/user/assistant chat template (so ``/v1/chat/completions`` works);
* ``config.json`` + ``model.safetensors`` + ``generation_config.json`` of a ``transformers.LlamaForCausalLM``
  (``hidden`` wide, ``heads`` heads of ``hidden/heads`` (64 by default: a head size every CPU attention path
  supports), no GQA, untied lm_head), randomly initialised and saved in float32. The lm_head rows of the
  special tokens are zeroed: under greedy decoding their logit is 0 while ~2000 random logits compete, so the
  model never picks EOS and a request runs to ``max_tokens`` (requests send ``ignore_eos`` too).

The last stdout line is a JSON summary. Only the standard library, torch, tokenizers and transformers.
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
from e2e_support.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS
from e2e_support.tokenizer import train_tokenizer as _train

CORPUS_FILES = 120  # stdlib modules: enough text for a 2048-token vocabulary in a few seconds
MAX_POSITIONS = 4096  # the server caps it with --max-model-len


def train_tokenizer(vocab: int) -> Any:
    return _train(vocab, CORPUS_FILES)


def build(out: Path, *, hidden: int, layers: int, heads: int, vocab: int, seed: int) -> dict[str, Any]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    tok = train_tokenizer(vocab)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   model_max_length=MAX_POSITIONS)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    t_tok = time.monotonic() - t0

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-5,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    special_ids = sorted(fast.convert_tokens_to_ids(list(SPECIAL_TOKENS)))
    with torch.no_grad():
        model.lm_head.weight[special_ids] = 0.0
    model.save_pretrained(str(out), safe_serialization=True)
    weights = out / "model.safetensors"
    if not weights.exists():
        raise SystemExit(f"save_pretrained wrote no {weights}: {sorted(p.name for p in out.iterdir())}")
    # Normalise the dtype field for every transformers version ("torch_dtype" before 5.x, "dtype" after).
    cfg = json.loads((out / "config.json").read_text())
    cfg["torch_dtype"] = "float32"
    cfg["dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))

    chat_ids = fast.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                        tokenize=True)
    if isinstance(chat_ids, dict):  # transformers 5.x may return a BatchEncoding
        chat_ids = chat_ids["input_ids"]
    return {
        "path": str(out),
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "vocab": len(fast),
        "params": int(sum(p.numel() for p in model.parameters())),
        "bytes": weights.stat().st_size,
        "special_ids": special_ids,
        "chat_template_tokens_for_hi": len(chat_ids),
        "tokenizer_seconds": round(t_tok, 2),
        "total_seconds": round(time.monotonic() - t0, 2),
        "torch": torch.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.hidden % args.heads:
        ap.error("--hidden must be a multiple of --heads")
    summary = build(args.out, hidden=args.hidden, layers=args.layers, heads=args.heads, vocab=args.vocab,
                    seed=args.seed)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
