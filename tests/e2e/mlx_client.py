"""Send a scripted mix of real requests to an ``mlx_lm.server`` and return ground-truth records.

    records = run_request_mix(server.url, second_model=str(models.second))

Each :class:`RequestRecord` holds what the client saw: wall-clock start/end (``time.time()``), HTTP status,
the model named in the request (``None`` = the server's default), the ``usage`` block (JSON body for
non-streaming requests, the final usage chunk for streams with ``stream_options.include_usage``), the
client-measured TTFT and the arrival time of every SSE chunk. These are what a log parser's output is
compared against.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from e2e_support.concurrent import run_concurrent as _run_concurrent
from e2e_support.score import UsageView

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"

# ~36 tokens per sentence with the tiny models' code-trained BPE (English splits finely): 85 sentences ≈ 3,060
# prompt tokens, two prefill chunks (2048 each), a few seconds on 2 CPU cores.
LONG_PROMPT_SENTENCES = 85


@dataclass
class RequestRecord(UsageView):
    name: str  # e.g. "chat", "chat-repeat", "concurrent-2"
    path: str  # "/v1/chat/completions" or "/v1/completions"
    stream: bool
    model: str | None  # the "model" field sent; None = omitted (server default)
    max_tokens: int
    t_start: float  # time.time() just before sending
    t_end: float = 0.0  # time.time() after the last byte (or the error)
    status: int | None = None  # HTTP status; None if the connection failed
    usage: dict[str, Any] | None = None  # {"prompt_tokens", "completion_tokens", "total_tokens", ...}
    ttft_s: float | None = None  # streams: first chunk with non-empty content minus t_start
    t_first_token: float | None = None  # streams: time.time() of that chunk
    chunk_times: list[float] = field(default_factory=list)  # streams: time.time() of each `data:` event
    content: str = ""  # generated text (joined deltas for streams)
    finish_reason: str | None = None
    response_model: str | None = None  # the "model" field of the response
    error: str | None = None  # exception text or error body
    concurrent_group: str | None = None  # set for requests sent together from threads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class MlxClient:
    """A thin synchronous client; every call returns a :class:`RequestRecord` and never raises on HTTP errors."""

    def __init__(self, base_url: str, timeout: float = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        # trust_env=False: a proxy from the environment must never see loopback traffic.
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MlxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(self, name: str, messages: list[dict[str, str]], *, max_tokens: int = 16, stream: bool = False,
             include_usage: bool = True, model: str | None = None, **extra: Any) -> RequestRecord:
        body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens, **extra}
        return self.post(name, CHAT, body, stream=stream, include_usage=include_usage, model=model)

    def complete(self, name: str, prompt: str, *, max_tokens: int = 16, stream: bool = False,
                 include_usage: bool = True, model: str | None = None, **extra: Any) -> RequestRecord:
        body: dict[str, Any] = {"prompt": prompt, "max_tokens": max_tokens, **extra}
        return self.post(name, COMPLETIONS, body, stream=stream, include_usage=include_usage, model=model)

    def post(self, name: str, path: str, body: dict[str, Any], *, stream: bool, include_usage: bool,
             model: str | None) -> RequestRecord:
        body = dict(body)
        if model is not None:
            body["model"] = model
        if stream:
            body["stream"] = True
            if include_usage:
                body["stream_options"] = {"include_usage": True}
        rec = RequestRecord(name=name, path=path, stream=stream, model=model,
                            max_tokens=int(body.get("max_tokens", 0)), t_start=time.time())
        try:
            if stream:
                self._stream(rec, path, body)
            else:
                resp = self._http.post(path, json=body)
                rec.status = resp.status_code
                rec.t_end = time.time()
                self._absorb_body(rec, resp)
        except httpx.HTTPError as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        if not rec.t_end:
            rec.t_end = time.time()
        return rec

    @staticmethod
    def _absorb_body(rec: RequestRecord, resp: httpx.Response) -> None:
        try:
            data = resp.json()
        except ValueError:
            rec.error = resp.text[:2000] or "(empty body)"
            return
        if resp.status_code != 200 or not isinstance(data, dict):
            rec.error = json.dumps(data)[:2000]
            return
        rec.usage = data.get("usage")
        rec.response_model = data.get("model")
        choices = data.get("choices") or [{}]
        choice = choices[0]
        message = choice.get("message") or {}
        rec.content = message.get("content") or choice.get("text") or ""
        rec.finish_reason = choice.get("finish_reason")

    def _stream(self, rec: RequestRecord, path: str, body: dict[str, Any]) -> None:
        with self._http.stream("POST", path, json=body) as resp:
            rec.status = resp.status_code
            if resp.status_code != 200:
                resp.read()
                rec.t_end = time.time()
                rec.error = resp.text[:2000]
                return
            parts: list[str] = []
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    continue
                now = time.time()
                rec.chunk_times.append(now)
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    rec.error = f"bad SSE payload: {payload[:200]}"
                    continue
                if chunk.get("usage"):
                    rec.usage = chunk["usage"]
                rec.response_model = chunk.get("model", rec.response_model)
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                    if piece:
                        if rec.t_first_token is None:
                            rec.t_first_token = now
                            rec.ttft_s = now - rec.t_start
                        parts.append(piece)
                    if choice.get("finish_reason"):
                        rec.finish_reason = choice["finish_reason"]
            rec.t_end = time.time()
            rec.content = "".join(parts)


def long_prompt(sentences: int = LONG_PROMPT_SENTENCES) -> str:
    return " ".join(f"Note {i}: the quick brown fox jumps over the lazy dog near the river bank."
                    for i in range(sentences))


def run_concurrent(client: MlxClient, calls: Sequence[tuple[str, dict[str, Any]]], group: str) -> list[RequestRecord]:
    """Send ``client.chat(name, **kwargs)`` for each (name, kwargs) from its own thread, all at once."""
    return _run_concurrent(client.chat, calls, group, thread_prefix="mlx-client")


def run_request_mix(base_url: str, *, second_model: str, long_sentences: int = LONG_PROMPT_SENTENCES,
                    concurrency: int = 4, max_tokens: int = 16) -> list[RequestRecord]:
    """The standard mix, in this order (names are the records' ``name``):

    ``chat``, ``chat-repeat`` (same prompt: prompt-cache reuse), ``chat-stream`` (include_usage),
    ``text``, ``text-stream`` (include_usage), ``long`` (~3k-token prompt, non-stream),
    ``concurrent-0..N-1`` (threads; odd ones stream with usage), ``switch`` (``model=second_model``),
    ``back-to-default`` (no ``model`` field: the server's ``--model``).
    """
    user = [{"role": "user", "content": "Hello there, tell me a short story about a dragon."}]
    system_user = [{"role": "system", "content": "You are a terse assistant."},
                   {"role": "user", "content": "What is the capital of France?"}]
    records: list[RequestRecord] = []
    with MlxClient(base_url) as client:
        records.append(client.chat("chat", user, max_tokens=max_tokens))
        records.append(client.chat("chat-repeat", user, max_tokens=max_tokens))
        records.append(client.chat("chat-stream", system_user, max_tokens=max_tokens, stream=True))
        records.append(client.complete("text", "def fibonacci(n):", max_tokens=max_tokens))
        records.append(client.complete("text-stream", "import os\nimport sys\n", max_tokens=max_tokens, stream=True))
        records.append(client.chat("long", [{"role": "user", "content": long_prompt(long_sentences)}],
                                   max_tokens=8))
        calls = [(f"concurrent-{i}",
                  {"messages": [{"role": "user", "content": f"Request {i}: " + "lorem ipsum dolor " * (10 * (i + 1))}],
                   "max_tokens": max_tokens + 8, "stream": bool(i % 2)})
                 for i in range(concurrency)]
        records.extend(run_concurrent(client, calls, group="concurrent"))
        records.append(client.chat("switch", [{"role": "user", "content": "Switch models, please."}],
                                   max_tokens=8, model=second_model))
        records.append(client.chat("back-to-default", [{"role": "user", "content": "And back again."}],
                                   max_tokens=8))
    return records


def dump_jsonl(records: Sequence[RequestRecord], path: str) -> None:
    with open(path, "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec.to_dict()) + "\n")
