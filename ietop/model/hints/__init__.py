"""Diagnostic hints: the symptom table as small rules. `types` holds the hint, its context and the named
thresholds; `rules` the rules (they import `types`); `engine` the `HintEngine` that runs them (it imports both).
This package re-exports what the rest of ietop uses.
"""

from __future__ import annotations

from ietop.model.hints.engine import HintEngine
from ietop.model.hints.rules import HINT_IDS, RULES
from ietop.model.hints.types import Hint, HintContext

__all__ = ["HINT_IDS", "RULES", "Hint", "HintContext", "HintEngine"]
