"""ietop/analyze"""

from __future__ import annotations
