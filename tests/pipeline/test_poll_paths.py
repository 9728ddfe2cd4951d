"""What the dashboard and the exporter poll: never an endpoint that loads a model, and never one whose answer
makes the engine log an error. mlx_lm 0.32 answers `/v1/models` by scanning the Hugging Face cache and logs a
`CacheNotFound` traceback when there is none (fixtures/mlx/info-no-hf-cache-server.stderr, lines 9-32): polled
every 2 s, ietop itself would fill the log with errors (issue 19)."""

from __future__ import annotations

from ietop.pipeline.polling import poll_urls

LOG_FROM_A_POLL = "fixtures/mlx/info-no-hf-cache-server.stderr"


def test_mlx_is_polled_on_health_only() -> None:
    urls = poll_urls([("mlx", "http://127.0.0.1:8080/")])
    assert urls == {"http://127.0.0.1:8080/health": ("mlx", "health", "http://127.0.0.1:8080")}


def test_the_traceback_a_models_poll_causes_is_real() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / LOG_FROM_A_POLL).read_text()
    assert '"GET /v1/models HTTP/1.1" 200 -' in text and "in handle_models_request" in text
    assert "huggingface_hub.errors.CacheNotFound" in text


def test_other_engines_keep_their_endpoints() -> None:
    urls = poll_urls([("ollama", "http://h:11434"), ("vllm", "http://h:8000")])
    assert sorted(kind for _engine, kind, _base in urls.values()) == ["metrics", "models", "ps", "version"]
