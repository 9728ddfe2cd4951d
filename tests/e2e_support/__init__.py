"""Code shared by the end-to-end harnesses (``tests/e2e`` for mlx_lm.server, ``tests/e2e_vllm`` for vLLM).

Each harness's conftest puts ``tests/`` on ``sys.path`` so its modules can ``import e2e_support.procs`` etc.;
the model builder scripts (run with another venv's python) do the same by path. Keep this ``__init__`` empty
of imports: ``tokenizer`` must load where neither httpx nor pytest is installed.
"""
