"""The dashboard (Textual): the app, its widgets (one per file) and screens. It imports the model, the pipeline's
feeds and plain data types; no `sources` module but `sources.samples`, and nothing imports it but the CLI.
"""

from __future__ import annotations
