"""Ollama `/api/ps` and `/api/version` answers → engine state and residency, never an exception.

The bodies are the files of fixtures/ollama/api (their README says which are real and which are
synthetic); malformed variations are written inline.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from parsers.api.engine_api import ollama_ps, ollama_version, rfc3339
from parsers.api.events import OllamaResidency, ResidentModel
from parsers.events import EngineStatus

API = Path(__file__).resolve().parents[2] / "fixtures" / "ollama" / "api"
URL = "http://127.0.0.1:11434/api/ps"
TS = datetime(2025, 8, 8, 12, 0, tzinfo=timezone.utc)
GB = 10**9


def _ps(body: bytes, status: int | None = 200, error: str | None = None) -> tuple[EngineStatus, OllamaResidency | None]:
    return ollama_ps(URL, TS, status, body, error)


def _fixture(name: str) -> bytes:
    return (API / name).read_bytes()


def _models(name: str) -> tuple[ResidentModel, ...]:
    state, residency = _ps(_fixture(name))
    assert state.state == "up" and residency is not None
    assert (residency.line, residency.ts, residency.endpoint) == (0, TS, URL)
    return residency.models


def _tz(hours: int) -> timezone:
    return timezone(timedelta(hours=hours))


def test_pre_v010_real_body_has_no_context_length() -> None:
    (m,) = _models("ps-pre-v0.10-nirmato13.json")
    assert m == ResidentModel(
        name="gemma3:latest", size=5964735424, size_vram=5964735424,
        expires_at=datetime(2025, 8, 8, 0, 7, 26, 817827, tzinfo=_tz(2)),  # 9 digits cut to 6, offset kept
        context_length=None, digest="a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a",
    )


def test_pre_v010_negative_offset() -> None:
    (m,) = _models("ps-pre-v0.10-ollama-python490.json")
    assert m.expires_at == datetime(2025, 3, 31, 16, 13, 25, 974861, tzinfo=_tz(-4))
    assert (m.name, m.size, m.size_vram, m.context_length) == ("llama3.2:latest", 3972362240, 3972362240, None)


def test_v0_1_4x_omitted_size_vram_is_unknown() -> None:
    (m,) = _models("ps-v0.1.4x-cpu-size-vram-omitted.json")
    assert (m.size, m.size_vram) == (4294967296, None)
    assert m.expires_at == datetime(2024, 6, 5, 10, 21, 43, 513220, tzinfo=_tz(8))  # 7 digits, trailing zeros dropped by Go


def test_v010_two_models_in_server_order() -> None:
    first, second = _models("ps-v0.10-two-models.json")
    assert (first.name, first.context_length, first.size_vram) == ("llama3.2:latest", 8192, 5432852480)
    assert first.expires_at == datetime(2025, 8, 12, 9, 46, 2, 510900, tzinfo=_tz(2))
    assert (second.name, second.context_length, second.size, second.size_vram) == ("qwen2.5:0.5b", 4096, 1221157120, 611057664)
    assert second.expires_at == datetime(2025, 8, 12, 9, 43, 51, 0, tzinfo=_tz(2))  # 1 ns is below microseconds


def test_keep_alive_forever_stays_a_datetime() -> None:
    (m,) = _models("ps-keep-alive-forever.json")
    assert m.expires_at == datetime(2318, 7, 1, 14, 12, 44, 936212, tzinfo=_tz(2))


def test_loading_model_has_no_context_yet() -> None:
    loading, resident = _models("ps-loading.json")
    assert (loading.name, loading.context_length, loading.size_vram) == ("llama3.1:70b", None, 23622320128)
    assert resident.context_length == 4096


def test_empty_list_is_up_with_no_model() -> None:
    state, residency = _ps(_fixture("ps-empty.json"))
    assert state == EngineStatus(0, TS, "ollama", URL, "up", "no model resident")
    assert residency == OllamaResidency(0, TS, URL, ())


def test_detail_counts_models() -> None:
    assert _ps(_fixture("ps-v0.10-two-models.json"))[0].detail == "2 models resident"
    assert _ps(_fixture("ps-keep-alive-forever.json"))[0].detail == "1 model resident"


def test_null_list_means_none_resident() -> None:
    assert _ps(b'{"models":null}') == (EngineStatus(0, TS, "ollama", URL, "up", "no model resident"),
                                      OllamaResidency(0, TS, URL, ()))


def test_connection_error_is_down() -> None:
    assert _ps(b"", None, "refused") == (EngineStatus(0, TS, "ollama", URL, "down", "refused"), None)
    assert _ps(b"", None, None) == (EngineStatus(0, TS, "ollama", URL, "down", "no answer"), None)


@pytest.mark.parametrize(("status", "body", "detail"), [
    (500, b'{"error":"something went wrong"}', "ps answered 500"),
    (404, b"404 page not found", "ps answered 404"),
    (200, b"<html><body>proxy login</body></html>", "ps answer is not a model list"),
    (200, b"", "ps answer is not a model list"),
    (200, b"\xff\xfe\x00", "ps answer is not a model list"),
    (200, b"[]", "ps answer is not a model list"),
    (200, b'{"version":"0.12.3"}', "ps answer is not a model list"),
    (200, b'{"models":{"name":"x"}}', "ps answer is not a model list"),
    (200, b'{"models":["llama3"]}', "ps listed 1 unreadable model(s)"),
    (200, b'{"models":[{"size":1}]}', "ps listed 1 unreadable model(s)"),
    (200, b'{"models":[{"name":""}, {"name":"ok"}]}', "ps listed 1 unreadable model(s)"),
])
def test_garbage_is_unknown_without_residency(status: int, body: bytes, detail: str) -> None:
    """A partial list would read as an unload of the missing model: no residency at all instead."""
    assert _ps(body, status) == (EngineStatus(0, TS, "ollama", URL, "unknown", detail), None)


@pytest.mark.parametrize(("field", "value"), [
    ("size", "5GB"), ("size", -1), ("size", True), ("size", 1.5), ("size", None),
    ("size_vram", [1]), ("context_length", "4096"), ("context_length", 0), ("context_length", False),
    ("expires_at", "tomorrow"), ("expires_at", 1754604446), ("expires_at", "2025-08-08 00:07:26"),
    ("expires_at", "2025-08-08T00:07:26.1234567890Z"), ("expires_at", "2025-02-30T00:00:00Z"),
    ("expires_at", "2025-08-08T00:07:26+24:00"), ("expires_at", "0001-01-01T00:00:00Z"),
    ("digest", 42), ("digest", ""),
])
def test_a_bad_field_is_none_and_the_rest_stays(field: str, value: Any) -> None:
    entry: dict[str, Any] = json.loads(_fixture("ps-v0.10-two-models.json"))["models"][0]
    entry[field] = value
    state, residency = _ps(json.dumps({"models": [entry]}).encode())
    assert state.state == "up" and residency is not None
    (m,) = residency.models
    assert getattr(m, field) is None
    assert m.name == "llama3.2:latest"
    others = {"size": 5432852480, "size_vram": 5432852480, "context_length": 8192}
    assert all(getattr(m, k) == v for k, v in others.items() if k != field)


def test_name_falls_back_to_model() -> None:
    _, residency = _ps(b'{"models":[{"model":"llama3.2:latest"}]}')
    assert residency is not None
    assert residency.models == (ResidentModel("llama3.2:latest", None, None, None, None, None),)


@pytest.mark.parametrize(("text", "expected"), [
    ("2025-08-08T00:07:26.817827822+02:00", datetime(2025, 8, 8, 0, 7, 26, 817827, tzinfo=_tz(2))),
    ("2025-08-08T00:07:26Z", datetime(2025, 8, 8, 0, 7, 26, tzinfo=timezone.utc)),
    ("2025-08-08t00:07:26.5z", datetime(2025, 8, 8, 0, 7, 26, 500000, tzinfo=timezone.utc)),
    ("2025-08-08T00:07:26.000001-09:30", datetime(2025, 8, 8, 0, 7, 26, 1, tzinfo=timezone(-timedelta(hours=9, minutes=30)))),
    ("2318-11-26T18:04:46.425846407+05:30", datetime(2318, 11, 26, 18, 4, 46, 425846, tzinfo=timezone(timedelta(hours=5, minutes=30)))),
    ("2025-08-08T00:07:26", None), ("2025-08-08T00:07:26.Z", None), (" 2025-08-08T00:07:26Z", None),
    ("2025-08-08T24:00:00Z", None), ("2025-08-08T00:07:60Z", None), ("", None), (None, None), (17, None),
])
def test_rfc3339(text: object, expected: datetime | None) -> None:
    parsed = rfc3339(text)
    assert parsed == expected
    assert parsed is None or parsed.tzinfo is not None


VERSION_URL = "http://127.0.0.1:11434/api/version"


@pytest.mark.parametrize(("name", "detail"), [("version-0.12.3.json", "version 0.12.3"), ("version-dev.json", "version 0.0.0")])
def test_version_fixtures(name: str, detail: str) -> None:
    assert ollama_version(VERSION_URL, TS, 200, _fixture(name), None) == EngineStatus(
        0, TS, "ollama", VERSION_URL, "up", detail)


def test_version_prerelease() -> None:
    assert ollama_version(VERSION_URL, TS, 200, b'{"version":"0.33.0-rc2"}', None).detail == "version 0.33.0-rc2"


def test_version_down() -> None:
    assert ollama_version(VERSION_URL, TS, None, b"", "timeout") == EngineStatus(
        0, TS, "ollama", VERSION_URL, "down", "timeout")


@pytest.mark.parametrize(("status", "body", "detail"), [
    (404, b"404 page not found", "version answered 404"),
    (200, b"<html>", "version answer unreadable"),
    (200, b'{"version":12}', "version answer unreadable"),
    (200, b'{"version":""}', "version answer unreadable"),
    (200, b'{"version":"0.1\\u001b[31m"}', "version answer unreadable"),
    (200, b'{"version":"' + b"9" * 65 + b'"}', "version answer unreadable"),
    (200, b'{"models":[]}', "version answer unreadable"),
])
def test_version_garbage_is_unknown(status: int, body: bytes, detail: str) -> None:
    assert ollama_version(VERSION_URL, TS, status, body, None) == EngineStatus(
        0, TS, "ollama", VERSION_URL, "unknown", detail)
