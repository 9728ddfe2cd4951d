"""Send a scripted mix of real requests to a vLLM OpenAI server and keep what the client saw as ground truth.

    result = run_request_mix(server.url, served_name="tinyllm")
    result.save(out_dir)   # requests.jsonl, metrics-before.txt, metrics-after.txt, v1-models.json, ...

Each :class:`RequestRecord` holds wall-clock start/end (``time.time()``), the HTTP status, the ``usage`` block
(the JSON body of a non-streaming request, the last chunk of a stream sent with
``stream_options.include_usage``), the client-measured TTFT of streams, and the error body of a rejected
request. ``/metrics`` is scraped (raw Prometheus text) before and after the mix, ``/v1/models`` and ``/version``
are fetched once. These are what ietop's log and metrics parsers are compared against.

Every request sends ``temperature=0`` and ``ignore_eos=true`` (a vLLM extension), so it generates exactly
``max_tokens`` tokens whatever the random model says.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from e2e_support.concurrent import run_concurrent as _run_concurrent
from e2e_support.score import UsageView

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MAX_MODEL_LEN = 512  # the server's --max-model-len (vllm_server.BASE_ARGS)

# Words that are single tokens (with their leading space) for a BPE trained on Python sources.
WORDS = ("def", "return", "import", "class", "self", "value", "None", "True", "False", "list", "dict", "for", "while",
         "lambda", "yield", "async", "await", "try", "except", "finally", "raise", "with", "as", "from", "pass")


@dataclass
class RequestRecord(UsageView):
    name: str  # e.g. "chat", "prefix-b", "concurrent-2", "too-long"
    path: str  # CHAT or COMPLETIONS
    stream: bool
    max_tokens: int
    t_start: float  # time.time() just before sending
    t_end: float = 0.0  # time.time() after the last byte (or the error)
    status: int | None = None  # HTTP status; None if the connection failed
    usage: dict[str, Any] | None = None  # {"prompt_tokens", "completion_tokens", "total_tokens", ...}
    ttft_s: float | None = None  # streams: first chunk with non-empty text minus t_start
    t_first_token: float | None = None  # streams: time.time() of that chunk
    chunks: int = 0  # streams: `data:` events with choices
    response_id: str | None = None  # "chatcmpl-…" / "cmpl-…": the id vLLM logs the request under
    finish_reason: str | None = None
    content: str = ""
    error: dict[str, Any] | str | None = None  # the error body (JSON if it was JSON) or exception text
    concurrent_group: str | None = None  # set for requests sent together from threads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MixResult:
    records: list[RequestRecord]
    metrics_before: str  # raw /metrics text
    metrics_after: str
    models: dict[str, Any]  # GET /v1/models
    version: dict[str, Any]  # GET /version
    prefix_prompt_tokens: int | None  # what /tokenize said about the repeated prompt
    t_start: float
    t_end: float

    @property
    def seconds(self) -> float:
        return self.t_end - self.t_start

    def by_name(self) -> dict[str, RequestRecord]:
        return {r.name: r for r in self.records}

    def save(self, out: Path) -> dict[str, Path]:
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "requests": out / "requests.jsonl",
            "metrics_before": out / "metrics-before.txt",
            "metrics_after": out / "metrics-after.txt",
            "models": out / "v1-models.json",
            "version": out / "version.json",
        }
        dump_jsonl(self.records, paths["requests"])
        paths["metrics_before"].write_text(self.metrics_before)
        paths["metrics_after"].write_text(self.metrics_after)
        paths["models"].write_text(json.dumps(self.models, indent=2))
        paths["version"].write_text(json.dumps(self.version, indent=2))
        return paths


class VllmClient:
    """A thin synchronous client; request methods return a :class:`RequestRecord` and never raise on HTTP errors."""

    def __init__(self, base_url: str, model: str, timeout: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        # trust_env=False: a proxy from the environment must never see loopback traffic.
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> VllmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plain GETs ----------------------------------------------------------------------------------
    def get_json(self, path: str) -> dict[str, Any]:
        resp = self._http.get(path)
        resp.raise_for_status()
        data = resp.json()
        return data if isinstance(data, dict) else {"value": data}

    def metrics(self) -> str:
        resp = self._http.get("/metrics")
        resp.raise_for_status()
        return resp.text

    def count_tokens(self, prompt: str) -> int | None:
        """Prompt tokens as the server counts them (``POST /tokenize``), or None if it has no such endpoint."""
        try:
            resp = self._http.post("/tokenize", json={"model": self.model, "prompt": prompt})
            count = resp.json().get("count") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return count if isinstance(count, int) else None

    # --- inference ----------------------------------------------------------------------------------
    def chat(self, name: str, messages: list[dict[str, str]], *, max_tokens: int = 16, stream: bool = False,
             **extra: Any) -> RequestRecord:
        return self.post(name, CHAT, {"messages": messages, "max_tokens": max_tokens, **extra}, stream=stream)

    def complete(self, name: str, prompt: str, *, max_tokens: int = 16, stream: bool = False,
                 **extra: Any) -> RequestRecord:
        return self.post(name, COMPLETIONS, {"prompt": prompt, "max_tokens": max_tokens, **extra}, stream=stream)

    def post(self, name: str, path: str, body: dict[str, Any], *, stream: bool) -> RequestRecord:
        body = {"model": self.model, "temperature": 0, "ignore_eos": True, **body}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        rec = RequestRecord(name=name, path=path, stream=stream, max_tokens=int(body.get("max_tokens", 0)),
                            t_start=time.time())
        try:
            if stream:
                self._stream(rec, path, body)
            else:
                resp = self._http.post(path, json=body)
                rec.t_end = time.time()
                rec.status = resp.status_code
                self._absorb(rec, resp)
        except httpx.HTTPError as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        if not rec.t_end:
            rec.t_end = time.time()
        return rec

    @staticmethod
    def _absorb(rec: RequestRecord, resp: httpx.Response) -> None:
        try:
            data = resp.json()
        except ValueError:
            rec.error = resp.text[:2000] or "(empty body)"
            return
        if not isinstance(data, dict):
            rec.error = str(data)[:2000]
            return
        if resp.status_code != 200:
            err = data.get("error", data)
            rec.error = err if isinstance(err, dict) else {"message": str(err)}
            return
        rec.usage = data.get("usage")
        rec.response_id = data.get("id")
        choice = (data.get("choices") or [{}])[0]
        rec.content = (choice.get("message") or {}).get("content") or choice.get("text") or ""
        rec.finish_reason = choice.get("finish_reason")

    def _stream(self, rec: RequestRecord, path: str, body: dict[str, Any]) -> None:
        with self._http.stream("POST", path, json=body) as resp:
            rec.status = resp.status_code
            if resp.status_code != 200:
                resp.read()
                rec.t_end = time.time()
                self._absorb(rec, resp)
                return
            parts: list[str] = []
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    continue
                now = time.time()
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    rec.error = f"bad SSE payload: {payload[:200]}"
                    continue
                rec.response_id = rec.response_id or chunk.get("id")
                if chunk.get("usage"):
                    rec.usage = chunk["usage"]
                choices = chunk.get("choices") or []
                if choices:
                    rec.chunks += 1
                for choice in choices:
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


def words(n: int, seed: int = 0) -> str:
    return " ".join(WORDS[(i * 7 + seed) % len(WORDS)] for i in range(n))


def prompt_of_about(client: VllmClient, target_tokens: int, seed: int) -> tuple[str, int | None]:
    """A completion prompt of about ``target_tokens`` tokens, sized with the server's own ``/tokenize``."""
    n = target_tokens
    count = client.count_tokens(words(n, seed))
    for _ in range(3):
        if count is None or abs(count - target_tokens) <= 8:
            break
        n = max(1, round(n * target_tokens / count))
        count = client.count_tokens(words(n, seed))
    return words(n, seed), count


def run_concurrent(client: VllmClient, calls: Sequence[tuple[str, dict[str, Any]]], group: str) -> list[RequestRecord]:
    """Send ``client.chat(name, **kwargs)`` for each (name, kwargs) from its own thread, released together."""
    return _run_concurrent(client.chat, calls, group, thread_prefix="vllm-client")


def metric_total(text: str, name: str) -> float:
    """Sum of all samples of ``name`` (every label set) in a Prometheus text scrape; 0.0 if absent."""
    total = 0.0
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})?\s+(\S+)")
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            total += float(m.group(1))
    return total


def wait_for_metric(client: VllmClient, name: str, at_least: float, timeout: float = 10.0) -> str:
    """Scrape until ``name`` reaches ``at_least`` (the engine updates counters just after responding)."""
    deadline = time.monotonic() + timeout
    text = client.metrics()
    while metric_total(text, name) < at_least and time.monotonic() < deadline:
        time.sleep(0.2)
        text = client.metrics()
    return text


def run_request_mix(base_url: str, *, served_name: str = "tinyllm", max_tokens: int = 16, concurrency: int = 4,
                    prefix_tokens: int = 300, settle_s: float = 0.0) -> MixResult:
    """The mix, in this order (``name`` of each record):

    ``chat`` (non-stream), ``completion`` (non-stream), ``chat-stream`` (``include_usage``),
    ``completion-stream`` (``include_usage``), ``concurrent-0..N-1`` (chats from N threads, prompts of growing
    size), ``prefix-a`` and ``prefix-b`` (the same ~``prefix_tokens``-token completion prompt twice: the second
    one hits the prefix cache in whole 128-token blocks), ``too-long`` (a completion prompt over
    ``--max-model-len``: 400). ``/metrics`` is scraped before the first and after the last request (after
    waiting for ``vllm:request_success_total`` to count every served request, and ``settle_s`` more: vLLM logs
    its ``Engine 000: Avg prompt throughput: …`` stats line at INFO every 10 s, only for intervals with work).
    """
    t0 = time.time()
    records: list[RequestRecord] = []
    with VllmClient(base_url, served_name) as client:
        models = client.get_json("/v1/models")
        try:
            version = client.get_json("/version")
        except httpx.HTTPError as exc:
            version = {"error": str(exc)}
        prefix_prompt, prefix_count = prompt_of_about(client, prefix_tokens, seed=99)
        before = client.metrics()
        served_before = metric_total(before, "vllm:request_success_total")

        records.append(client.chat("chat", [{"role": "user", "content": words(20, 1)}], max_tokens=max_tokens))
        records.append(client.complete("completion", words(40, 2), max_tokens=max_tokens))
        records.append(client.chat("chat-stream", [{"role": "system", "content": "You are terse."},
                                                   {"role": "user", "content": words(60, 3)}],
                                   max_tokens=max_tokens, stream=True))
        records.append(client.complete("completion-stream", words(80, 4), max_tokens=max_tokens, stream=True))
        calls = [(f"concurrent-{i}", {"messages": [{"role": "user", "content": words(30 + 25 * i, 10 + i)}],
                                      "max_tokens": 2 * max_tokens})
                 for i in range(concurrency)]
        records.extend(run_concurrent(client, calls, group="concurrent"))
        records.append(client.complete("prefix-a", prefix_prompt, max_tokens=max_tokens))
        records.append(client.complete("prefix-b", prefix_prompt, max_tokens=max_tokens))
        records.append(client.complete("too-long", words(4 * MAX_MODEL_LEN, 7), max_tokens=max_tokens))

        served = sum(1 for r in records if r.status == 200)
        wait_for_metric(client, "vllm:request_success_total", served_before + served)
        time.sleep(settle_s)
        after = client.metrics()
    return MixResult(records=records, metrics_before=before, metrics_after=after, models=models, version=version,
                     prefix_prompt_tokens=prefix_count, t_start=t0, t_end=time.time())


def dump_jsonl(records: Sequence[RequestRecord], path: Path | str) -> None:
    with open(path, "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec.to_dict()) + "\n")
