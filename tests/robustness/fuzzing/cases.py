"""What a target runs: a `Case` (its recipes and small choices, drawn by `random_case` for the campaign and by
`case_strategy` for hypothesis, the same shape) and the `Input` bytes it materializes to (`case_input`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.robustness.fuzzing.mutate import MAX_OPS, MAX_WINDOW, OP_DECK, Recipe, materialize, random_recipe
from tests.robustness.fuzzing.seeds import Seed, api_seeds, log_seeds, seed_deck

CSV_EVERY = 8
"""`--csv` on every CSV_EVERY-th analyze case: polars' writer costs as much as the other three runs together."""
PARSER_ENGINES = ("ollama", "vllm", "mlx", "proxy")
ENGINE_FLAGS = ("ollama", "vllm", "mlx", "proxy")


@dataclass(frozen=True)
class Input:
    """A materialized case: file contents and what to run them through."""

    target: str
    files: tuple[bytes, ...]
    option: str = ""
    """analyze: `--engine` value or ""; parsers: the engine; api: the entry point (and stream seed)."""
    arg: int = 0
    """The case's free parameter: the line NUL-padded (parsers), the chunking (text, api streams)."""
    csv: bool = False
    """analyze: also run with `--csv`."""


@dataclass(frozen=True)
class Case:
    """What a target draws: recipes (one per file; analyze may merge two), and the case's small choices."""

    target: str
    recipes: tuple[Recipe, ...]
    choice: int = 0
    """analyze: --engine (0-5: none; 6: the seed's; 7: another); parsers: the engine (by the seed's, or
    another); api: ignored (the seed's entry point)."""
    arg: int = 0
    csv: bool = False


def case_input(case: Case) -> Input:
    """Materialize a case into the bytes (and option) its target runs."""
    if case.target == "api":
        seeds = api_seeds()
        r = case.recipes[0]
        seed = seeds[r.seed % len(seeds)]
        # The whole body: a window of a pretty-printed JSON answer would be garbage before any mutation.
        whole = Recipe(0, 0, len(seed.body), r.ops, r.newline)
        data = materialize(whole, [Seed(seed.name, seed.api, seed.body)])
        option = f"stream:{r.seed % len(seeds)}" if seed.api == "stream" else seed.api
        return Input("api", (data,), option, case.arg)
    pool: Sequence[Seed] = log_seeds()
    deck = seed_deck()
    files = tuple(materialize(r, pool, deck) for r in case.recipes)
    seed_engine = pool[deck[case.recipes[0].seed % len(deck)]].engine
    if case.target == "analyze":
        engine = {6: seed_engine if seed_engine in ENGINE_FLAGS else "vllm",
                  7: ENGINE_FLAGS[case.arg % len(ENGINE_FLAGS)]}.get(case.choice % 8, "")
        return Input("analyze", files, engine, case.arg, case.csv)
    if case.target == "parsers":
        engine = seed_engine if case.choice % 4 and seed_engine in PARSER_ENGINES else (
            "vllm" if seed_engine == "metrics" else PARSER_ENGINES[case.arg % len(PARSER_ENGINES)])
        return Input("parsers", files[:1], engine, case.arg)
    return Input("text", files[:1], "", case.arg)


def random_case(target: str, rng: random.Random, index: int) -> Case:
    n = len(api_seeds()) if target == "api" else len(seed_deck())
    count = 2 if target == "analyze" and rng.random() < 0.15 else 1
    recipes = tuple(random_recipe(rng, n) for _ in range(count))
    return Case(target, recipes, rng.randrange(8), rng.randrange(1 << 20),
                target == "analyze" and index % CSV_EVERY == 0)


def case_strategy(target: str) -> Any:
    """Hypothesis' draw of a `Case` of `target` (the shape `random_case` draws): it shrinks toward the first
    seed, a one-line window and no operation. Hypothesis is imported here: the campaign does not need it."""
    from hypothesis import strategies as st

    n = len(api_seeds()) if target == "api" else len(seed_deck())
    op = st.tuples(st.sampled_from(OP_DECK), st.integers(0, (1 << 16) - 1), st.integers(0, (1 << 20) - 1))
    recipe = st.builds(Recipe, st.integers(0, n - 1), st.integers(0, (1 << 16) - 1), st.integers(1, MAX_WINDOW),
                       st.lists(op, max_size=MAX_OPS).map(tuple), st.booleans())
    recipes = st.lists(recipe, min_size=1, max_size=2 if target == "analyze" else 1).map(tuple)
    csv = st.integers(0, CSV_EVERY - 1).map(lambda i: target == "analyze" and i == 0)
    return st.builds(Case, st.just(target), recipes, st.integers(0, 7), st.integers(0, (1 << 20) - 1), csv)
