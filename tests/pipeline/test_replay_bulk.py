"""The dashboard's replay can read the logs that have a columnar reader (ietop.pipeline.bulk.stream.foldable:
Ollama's, vLLM's) with it (`ReplayFeed.columnar`, off by default: see there), and ends in the store the per-line
reader (TailParse) left: counts, records, settings, line counts and evidence. The others (MLX) keep TailParse.

The two readers hand the store the same facts in different items: TailParse counts the health checks of each
read (~2,000 lines) into one AccessCount at its end, the columnar reader one per run of them, at its place; a
GIN line in terminal colours is counted by TailParse's shortcut but parsed by the columnar reader (an
HttpAccess the store then counts). The comparison is therefore of what the store keeps, and of every event
other than those. Where the item order does show, at `--until`, the columnar count is the closer one.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ietop.model.records import Ref, is_inference
from ietop.model.store import ListSink, Store
from ietop.pipeline.bulk import lines as bulk_lines
from ietop.pipeline.bulk import stream as bulk_stream
from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.feeds import Batch, Evidence, ReplayFeed
from ietop.pipeline.ingest import FileInput, run_files
from parsers.events import AccessCount, Event, HttpAccess
from parsers.ollama.gofmt import epoch

ROOT = Path(__file__).resolve().parents[2]
OLLAMA = sorted((ROOT / "fixtures" / "ollama").glob("*.log"))
FIXTURES = sorted(p for engine in ("ollama", "vllm", "mlx") for p in (ROOT / "fixtures" / engine).iterdir()
                  if p.is_file() and p.suffix in (".log", ".txt", ".stderr"))
KEEP_ALL = 1 << 20
"""An evidence ring larger than any log here: every line that gave an event is still in it at the end."""


class CountingSink(ListSink):
    """Keeps every record, but no successful probe: as the dashboard's LiveView, so the store only counts those
    and the replay may fold them."""

    keeps_ok_probes = False


@dataclasses.dataclass
class Replayed:
    store: Store
    sink: CountingSink
    evidence: Evidence
    batches: list[Batch]
    feed: ReplayFeed


def replay(paths: list[Path], columnar: bool, keep: int = KEEP_ALL) -> Replayed:
    sink = CountingSink()
    store = Store(sink)
    evidence = Evidence(keep)
    feed = ReplayFeed(store, [str(p) for p in paths], ReplayClock(0), evidence, columnar=columnar)
    batches: list[Batch] = []
    feed.run(batches.append, threading.Event())
    assert batches[-1].done and batches[-1].error is None, batches[-1].error
    for b in batches:
        store.apply_all(b.items)
        for src, n in b.lines.items():
            store.sources[src].lines = n
    store.flush()
    return Replayed(store, sink, evidence, batches, feed)


def _ok_probe(event: Event) -> bool:
    """What the dashboard's store counts without a record (Store._request)."""
    return type(event) is HttpAccess and not is_inference(event.method, event.path) and event.status < 400


def _facts(r: Replayed, own_times: bool = False) -> dict[int, list[tuple[float, Event]]]:
    """Per source, every (time, event) but the successful probes, in order. `own_times`: each time raised to
    the latest the source's events carried so far, as analyze's reader (ingest.sequenced) times them."""
    out: dict[int, list[tuple[float, Event]]] = {}
    latest: dict[int, float] = {}
    for b in r.batches:
        for src, t, event in b.items:
            if own_times:
                own = epoch(event.ts) if event.ts is not None else t
                t = latest[src] = max(t, own, latest.get(src, t))
            if type(event) is not AccessCount and not _ok_probe(event):
                out.setdefault(src, []).append((t, event))
    return out


def _probes(r: Replayed) -> int:
    return sum(e.count if type(e) is AccessCount else 1
               for b in r.batches for _s, _t, e in b.items if type(e) is AccessCount or _ok_probe(e))


def _refs(obj: Any, seen: set[int] | None = None) -> Iterator[Ref]:
    """Every Ref a record holds (its own line, the lines it cites). Records link in cycles (a request and the
    load it waited for, whose trigger it is): each is walked once."""
    seen = set() if seen is None else seen
    if isinstance(obj, Ref):
        yield obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for f in dataclasses.fields(obj):
            yield from _refs(getattr(obj, f.name), seen)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _refs(x, seen)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _refs(x, seen)


def assert_same_store(paths: list[Path]) -> tuple[Replayed, Replayed]:
    old, new = replay(paths, columnar=False), replay(paths, columnar=True)
    names = [str(p) for p in paths]
    assert new.store.counts == old.store.counts
    assert sorted(new.sink.records) == sorted(old.sink.records)
    for kind, recs in old.sink.records.items():
        assert [r.as_dict(names) for r in new.sink.records[kind]] == [r.as_dict(names) for r in recs], kind
    assert new.store.settings.as_dict(names) == old.store.settings.as_dict(names)
    # The per-line replay timed what the parser held until the end of the file (a traceback: a vLLM log's last
    # record) at the last line's time; the columnar reader, as analyze, at that record's own when later.
    clocked = _facts(old, own_times=True)
    assert _facts(new) == clocked
    assert new.store.now == max([old.store.now, *(t for facts in clocked.values() for t, _e in facts)])
    assert new.store.events_total == old.store.events_total
    assert [dataclasses.astuple(s) for s in new.store.sources] == [dataclasses.astuple(s) for s in old.store.sources]
    texts = [p.read_bytes().decode("utf-8", errors="replace").split("\n") for p in paths]
    counted = {i: len(t) - (t[-1] == "") for i, t in enumerate(texts)}
    assert new.batches[-1].lines == old.batches[-1].lines == counted
    assert [i.lines for i in new.feed.inputs] == [i.lines for i in old.feed.inputs]
    assert _probes(new) == _probes(old)
    # Evidence: the line of every record, and every line it cites, is looked up alike: the raw text, envelope
    # included (or nothing in both: a multi-line record's first line gave no event when it was read).
    for ref in {r for recs in old.sink.records.values() for rec in recs for r in _refs(rec)}:
        got = new.evidence.lookup(ref.src, ref.line)
        assert got == old.evidence.lookup(ref.src, ref.line), ref
        assert got is None or got == texts[ref.src][ref.line - 1], ref
    # The rings differ only by successful probes: a line one reader folded (no event, so not kept) and the other
    # parsed into an HttpAccess (kept): TailParse folds Ollama's coloured GIN lines, polars only plain ones;
    # TailParse folds no vLLM line, polars its uvicorn access lines.
    for src in range(len(paths)):
        was = {slot for slot in old.evidence.ring(src) if slot is not None}
        now = {slot for slot in new.evidence.ring(src) if slot is not None}
        probes = {e.line for r in (old, new) for b in r.batches for s, _t, e in b.items if s == src and _ok_probe(e)}
        assert {line for line, _text in now ^ was} <= probes
    return old, new


@pytest.mark.parametrize("log", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_replays_to_the_same_store(log: Path) -> None:
    assert_same_store([log])


def test_ollama_fixtures_merged_replay_to_the_same_store() -> None:
    """Several logs at once: merged by time, the folded counts stand where the probes stood."""
    assert_same_store(OLLAMA[:12])


@pytest.fixture(scope="module")
def busy_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SYNTHETIC 2 MB busy Ollama log: one E5 server, ~90 % health checks, llama-server slot lines."""
    log = tmp_path_factory.mktemp("busy") / "busy.log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_ollama_log.py"), str(log), "--size", "2M",
                    "--seed", "7", "--profile", "busy", "--meta", "-"], check=True, capture_output=True)
    return log


@pytest.mark.parametrize("window", [None, 256 << 10], ids=["window", "small-windows"])
def test_synthetic_logs_replay_to_the_same_store(busy_log: Path, synthetic_log: Path, window: int | None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Both profiles; in small windows too, so that runs of probes and offsets cross window edges."""
    if window is not None:
        monkeypatch.setattr(bulk_lines, "WINDOW", window)
    for log in (busy_log, synthetic_log):
        _old, new = assert_same_store([log])
        assert _probes(new) > 1000
    assert_same_store([busy_log, synthetic_log])


def test_the_evidence_ring_keeps_the_same_lines_at_the_dashboards_size(busy_log: Path) -> None:
    """At the ring's own size (lines overwrite each other), the records' lines are looked up alike."""
    old, new = replay([busy_log], False, keep=5000), replay([busy_log], True, keep=5000)
    refs = {r for recs in old.sink.records.values() for rec in recs for r in _refs(rec)}
    assert refs
    assert [new.evidence.lookup(r.src, r.line) for r in refs] == [old.evidence.lookup(r.src, r.line) for r in refs]


def _fail(*_a: object, **_k: object) -> Iterator[Any]:
    raise AssertionError("the columnar reader was used")


@pytest.mark.parametrize("log", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_log_without_a_columnar_reader_keeps_the_per_line_one(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = bulk_stream.bulk_file_events
    used: list[str] = []

    def spy(inp: FileInput, *args: Any, **kw: Any) -> Iterator[Any]:
        used.append(inp.engine)
        return read(inp, *args, **kw)

    monkeypatch.setattr(bulk_stream, "bulk_file_events", spy)
    r = replay([log], columnar=True)
    assert used == ([r.feed.inputs[0].engine] if bulk_stream.foldable(r.feed.inputs[0]) else [])
    assert r.feed.inputs[0].engine != "mlx" or not used


def test_a_store_that_keeps_probes_keeps_the_per_line_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sink that keeps successful probes wants their HttpAccess events: nothing is folded for it."""
    monkeypatch.setattr(bulk_stream, "bulk_file_events", _fail)
    batches: list[Batch] = []
    ReplayFeed(Store(ListSink()), [str(OLLAMA[0])], ReplayClock(0), Evidence()).run(batches.append, threading.Event())
    assert batches[-1].done and batches[-1].error is None
    assert not any(type(e) is AccessCount for b in batches for _s, _t, e in b.items)


def test_a_read_error_mid_replay_ends_it_with_the_error(busy_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = busy_log.read_bytes()

    def failing(path: str, size: int = 1 << 16) -> Iterator[bytes]:
        yield from (data[i:i + (64 << 10)] for i in range(0, 320 << 10, 64 << 10))
        raise OSError("device gone")

    monkeypatch.setattr(bulk_lines, "WINDOW", 256 << 10)
    monkeypatch.setattr(bulk_stream, "read_chunks", failing)
    sink = CountingSink()
    batches: list[Batch] = []
    ReplayFeed(Store(sink), [str(busy_log)], ReplayClock(0), Evidence(), columnar=True).run(
        batches.append, threading.Event())
    assert batches[-1].done and batches[-1].error == "replay stopped: device gone"
    assert sum(len(b.items) for b in batches) > 0, "what was read before the error was posted"


def _held(paths: list[Path], until: float, columnar: bool) -> Store:
    """The store as the screen has it when the replay pauses at `--until`."""
    store = Store(CountingSink())
    stop = threading.Event()
    got: list[Batch] = []

    def post(batch: Batch) -> None:
        got.append(batch)
        if batch.held or batch.done:
            stop.set()  # held: the feed would wait for a key from here

    feed = ReplayFeed(store, [str(p) for p in paths], ReplayClock(0), Evidence(), until=until, columnar=columnar)
    worker = threading.Thread(target=feed.run, args=(post, stop))
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and got[-1].held
    for b in got:
        store.apply_all(b.items)
    return store


def test_until_holds_at_the_same_facts_and_counts_the_probes_before_it(synthetic_log: Path) -> None:
    """At `--until` both readers show the same records; TailParse's count of requests lags (a read's probes
    arrive in one AccessCount at its end, stamped with its last time, so those before `--until` wait behind
    it), the columnar reader's lags by at most the run of probes that straddles the moment."""
    sink = ListSink()
    run_files(Store(sink), [str(synthetic_log)])
    requests = sink.records["request"]
    closer = 0
    for frac in (0.1, 0.37, 0.5, 0.83):
        until = requests[int(len(requests) * frac)].t_end + 0.5
        exact = Store(ListSink())
        run_files(exact, [str(synthetic_log)], until=until)
        old, new = _held([synthetic_log], until, False), _held([synthetic_log], until, True)
        assert {k: v for k, v in new.counts.items() if k != "requests"} == \
            {k: v for k, v in old.counts.items() if k != "requests"}
        assert new.events_total == old.events_total
        assert old.counts["requests"] <= new.counts["requests"] <= exact.counts["requests"]
        closer += new.counts["requests"] > old.counts["requests"]
    assert closer >= 3
