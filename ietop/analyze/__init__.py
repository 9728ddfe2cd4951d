"""`ietop analyze`: run the pipeline over saved logs and report (terminal, JSON, CSV, Parquet). Imports the
pipeline and the model; never Textual.
"""

from __future__ import annotations
