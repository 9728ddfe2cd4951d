"""python -m ietop"""

from __future__ import annotations

import sys

from ietop.cli import main

sys.exit(main())
