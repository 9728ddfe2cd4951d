"""ietop/model"""

from __future__ import annotations
