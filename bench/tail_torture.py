#!/usr/bin/env python3
"""Torture the live tailer (ietop.sources.tailer.FileTailer, as the dashboard's TailFeed drives it:
``follow(stop, timeout, texts=True)``) and count every line end to end: 0 lost, 0 duplicated.

Writers are child processes (this script with ``--writer``) writing uniquely numbered lines; the tailer runs
here and checks each line it yields: writer, sequence number, the line's own checksum (its number again at its
end: a fragment or two lines glued together fail it), order within the writer. Scenarios:

- ``storm``: rename + new file (logrotate ``create``, a RotatingFileHandler) after every 1..N lines, onto one
  ``.1`` name (so the file before is deleted while the tailer may still be reading it), 1 in 4 times delete +
  recreate instead; the writer's pieces split lines anywhere, a rotation falls between lines.
- ``copytruncate``: logrotate's copy, then truncate to 0, under an ``O_APPEND`` writer.
- ``copytruncate-nul``: the same under a writer without ``O_APPEND``, which goes on at its old offset: the
  file reread from 0 starts with a hole of NULs as long as everything written so far.
- ``interleaved``: two processes appending with ``O_APPEND`` to one file, whole lines per write.
- ``burst``: a million lines as fast as one process writes them, in pieces that split lines anywhere.

What a tailer that follows a *name* can promise, and so what is counted. It can read a file only once it has
opened it, and it opens what is at the name when it looks. So (1) a file renamed away before the tailer ever
looked at the name is never read, by this tailer or by ``tail -F``: the storm's writer rotates as fast as it
can, but not away from a file the tailer has not opened yet (it asks ``open K`` and waits until the tailer's
``rotations`` >= K; it may still be far behind in that file). (2) copytruncate loses by itself what is written
between its copy and its truncate, and what no reader had read before the truncate survives only in the copy:
there the writer waits until the tailer has seen every line it wrote (``seen N``), so that what is measured is
the tailer, not logrotate's race. Nothing else waits: the writing, the rotations, the truncations and the
tailer's reads race freely.

    .venv/bin/python bench/tail_torture.py                       # every scenario, 1,000,000 lines each
    .venv/bin/python bench/tail_torture.py --lines 200000 --scenario storm copytruncate-nul

Prints one JSON report (``--out`` writes it to a file too); exits 1 when a line was lost, repeated, out of
order or garbled, or a tailer counter disagrees with the writers'.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Spec:
    writers: int
    append: bool
    """O_APPEND; without it a writer goes on at its own offset after a truncation (a hole of NULs before)."""
    rotate: str
    """"rename", "copytruncate" or "none"."""
    whole: bool
    """Whole lines per write (two writers to one file); else pieces that split lines anywhere."""
    per_million: int
    """Rotations per 1,000,000 lines."""


SCENARIOS = {
    "storm": Spec(1, True, "rename", False, 4000),
    "copytruncate": Spec(1, True, "copytruncate", False, 400),
    "copytruncate-nul": Spec(1, False, "copytruncate", False, 10),
    "interleaved": Spec(2, True, "none", True, 0),
    "burst": Spec(1, True, "none", False, 0),
}
PAD = [b"." * n for n in range(0, 160, 13)]
STALL_S = 10.0
"""No line and no message for this long: something is stuck or lost; the run ends and says so."""


def line(writer: int, seq: int) -> bytes:
    """Writer digit, sequence number, payload of varying length, the sequence number again (the checksum)."""
    return b'%d%010d level=INFO msg="torture" pad=%s %010d\n' % (writer, seq, PAD[seq % len(PAD)], seq)


# -- the writer (a child process) ---------------------------------------------------------------------------


def _ask(request: str) -> None:
    """Tell the tailer's side what this writer is about to do, and wait for its go-ahead."""
    print(request, flush=True)
    if sys.stdin.readline().strip() != "ok":
        raise SystemExit(3)


def _write(fd: int, lines: list[bytes], rng: random.Random, whole: bool) -> None:
    if whole:  # whole lines per write(2): with O_APPEND, another writer's lines land between, never inside
        i = 0
        while i < len(lines):
            n = rng.randint(1, 64)
            os.write(fd, b"".join(lines[i:i + n]))
            i += n
        return
    data = memoryview(b"".join(lines))
    pos = 0
    while pos < len(data):
        pos += os.write(fd, data[pos:pos + rng.randint(1, 1 << rng.randint(4, 18))])


def writer_main(path: str, writer: int, count: int, append: bool, rotate: str, every: int, whole: bool,
                seed: int) -> None:
    rng = random.Random(seed * 1000 + writer)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    fd = os.open(path, flags, 0o644)
    written = rotations = 0
    while written < count:
        n = min(rng.randint(1, 2 * every - 1) if every else count, count - written)
        _write(fd, [line(writer, s) for s in range(written, written + n)], rng, whole)
        written += n
        if written == count or rotate == "none":
            continue
        if rotate == "copytruncate":
            _ask(f"seen {written}")
            shutil.copyfile(path, path + ".1")
            os.truncate(path, 0)
        else:
            _ask(f"open {rotations}")
            if rng.random() < 0.25:
                os.unlink(path)
            else:
                os.replace(path, path + ".1")
            os.close(fd)
            fd = os.open(path, flags, 0o644)
        rotations += 1
    os.close(fd)
    print(f"done {written} {rotations}", flush=True)


# -- the tailer's side ----------------------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    writers: int
    expected: int
    lines: int = 0
    """Lines the tailer yielded, all of them (duplicates and garbled ones too)."""
    lost: int = 0
    duplicated: int = 0
    disordered: int = 0
    garbled: int = 0
    seconds: float = 0.0
    rotations: int = 0
    truncations: int = 0
    writer_rotations: int = 0
    padding_bytes: int = 0
    bytes: int = 0
    ended: str = "done"
    samples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        rotate = SCENARIOS[self.scenario].rotate
        counters = (self.rotations, self.truncations) == (
            (self.writer_rotations, 0) if rotate == "rename" else (0, self.writer_rotations))
        return (self.ended == "done" and counters and self.lines == self.expected
                and not (self.lost or self.duplicated or self.disordered or self.garbled))


class _Tally:
    """Every line checked as it arrives: a count per (writer, number), order within each writer."""

    def __init__(self, counts: list[int], result: Result) -> None:
        self.seen = [bytearray(n) for n in counts]
        self.distinct = [0] * len(counts)
        self.last = [-1] * len(counts)
        self.result = result

    def add(self, texts: list[str]) -> None:
        seen, distinct, last, res = self.seen, self.distinct, self.last, self.result
        res.lines += len(texts)
        for text in texts:
            w = ord(text[0]) - 48 if text else -1
            if not 0 <= w < len(seen) or text[1:11] != text[-10:] or not text[1:11].isdigit():
                res.garbled += 1
                if len(res.samples) < 5:
                    res.samples.append(repr(text[:80]))
                continue
            seq = int(text[1:11])
            marks = seen[w]
            if seq >= len(marks):
                res.garbled += 1
                continue
            c = marks[seq]
            if c == 0:
                distinct[w] += 1
            else:
                res.duplicated += 1
            marks[seq] = min(c + 1, 255)
            if seq <= last[w]:
                res.disordered += 1
            last[w] = seq

    def finish(self) -> None:
        self.result.lost = sum(marks.count(0) for marks in self.seen)


def _spawn(path: Path, writer: int, count: int, spec: Spec, every: int, seed: int) -> subprocess.Popen[str]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--writer", str(path), "--id", str(writer),
            "--count", str(count), "--rotate", spec.rotate, "--every", str(every), "--seed", str(seed)]
    argv += [] if spec.append else ["--no-append"]
    argv += ["--whole"] if spec.whole else []
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)


def _listen(w: int, out: IO[str], inbox: queue.Queue[tuple[int, list[str]]]) -> None:
    for msg in out:
        inbox.put((w, msg.split() or ["?"]))
    inbox.put((w, ["eof"]))


def run(scenario: str, workdir: Path, lines: int, *, seed: int = 1, timeout: float = 600.0,
        rotations: int | None = None) -> Result:
    """One scenario with `lines` lines in all, in `workdir` (empty); `rotations`: about how many (the scenario's
    rate per million lines when None)."""
    from ietop.sources.tailer import FileTailer

    spec = SCENARIOS[scenario]
    nw = spec.writers
    counts = [lines // nw + (w < lines % nw) for w in range(nw)]
    want = rotations if rotations is not None else spec.per_million * lines // 1_000_000
    every = max(1, lines // want) if want and spec.rotate != "none" else 0
    res = Result(scenario, nw, lines)
    tally = _Tally(counts, res)
    path = workdir / "torture.log"
    path.write_bytes(b"")  # there before the tailer: the file it opens first is file 0 of `open K`
    tailer = FileTailer(path, poll_interval=0.02)
    inbox: queue.Queue[tuple[int, list[str]]] = queue.Queue()
    started = time.monotonic()
    procs = [_spawn(path, w, counts[w], spec, every, seed) for w in range(nw)]
    replies: list[IO[str]] = []
    for w, proc in enumerate(procs):
        assert proc.stdout is not None and proc.stdin is not None
        replies.append(proc.stdin)
        threading.Thread(target=_listen, args=(w, proc.stdout, inbox), daemon=True).start()
    pending: dict[int, tuple[str, int]] = {}
    done = [False] * nw
    stop = threading.Event()
    last_news = started
    try:
        for batch in tailer.follow(stop, timeout=0.02, texts=True):
            now = time.monotonic()
            if batch:
                tally.add(batch)
                last_news = now
            while not inbox.empty():
                w, msg = inbox.get()
                last_news = now
                if msg[0] == "done":
                    done[w] = True
                    res.writer_rotations += int(msg[2])
                elif msg[0] in ("seen", "open"):
                    pending[w] = (msg[0], int(msg[1]))
                elif not done[w]:  # eof or anything else before "done": the writer failed
                    res.ended = f"writer {w} failed"
                    stop.set()
            for w, (kind, n) in list(pending.items()):
                if (tally.distinct[w] if kind == "seen" else tailer.rotations) >= n:
                    del pending[w]
                    replies[w].write("ok\n")
                    replies[w].flush()
            if all(done) and sum(tally.distinct) == lines:
                stop.set()
            elif now - last_news > STALL_S or now - started > timeout:
                res.ended = "stalled" if now - last_news > STALL_S else "timed out"
                stop.set()
        while True:  # whatever is still there: a line read twice would show now
            tally.add(tailer.read_texts())
            if not tailer.has_more:
                break
    finally:
        res.seconds = round(time.monotonic() - started, 3)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        tailer.close()
    tally.finish()
    res.rotations, res.truncations = tailer.rotations, tailer.truncations
    res.padding_bytes, res.bytes = tailer.padding, tailer.bytes
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines per scenario (default 1,000,000)")
    ap.add_argument("--scenario", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per scenario")
    ap.add_argument("--out", type=Path, help="also write the JSON report here")
    ap.add_argument("--writer", metavar="PATH", help=argparse.SUPPRESS)
    ap.add_argument("--id", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--rotate", default="none", help=argparse.SUPPRESS)
    ap.add_argument("--every", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--no-append", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.writer:
        writer_main(args.writer, args.id, args.count, not args.no_append, args.rotate, args.every, args.whole,
                    args.seed)
        return 0
    sys.path.insert(0, str(REPO))
    results: list[Result] = []
    for scenario in args.scenario:
        with tempfile.TemporaryDirectory(prefix="tail-torture-") as tmp:
            results.append(run(scenario, Path(tmp), args.lines, seed=args.seed, timeout=args.timeout))
    total = {k: sum(getattr(r, k) for r in results)
             for k in ("expected", "lines", "lost", "duplicated", "disordered", "garbled", "rotations",
                       "truncations", "padding_bytes")}
    report = {"bench": "tail_torture", "python": platform.python_version(), "platform": platform.platform(),
              "cpus": os.cpu_count(), "seed": args.seed, "ok": all(r.ok for r in results),
              "seconds": round(sum(r.seconds for r in results), 3), "total": total,
              "scenarios": [asdict(r) | {"ok": r.ok} for r in results]}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
