"""Fuzz oracles: the invariants a case must hold, each broken one reported as a `Violation`; the targets
(analyze.py, targets.py) run the product and apply them.

Invariants (`Violation.kind`)
-----------------------------
crash (an exception escapes `main`), exit (a code other than 0/1/2, or 2 for a readable file), stderr (a
failure not reported as one `ietop: error:` line, or a traceback on stderr), partial_stdout (output written
before a failure), modes_disagree (the text and JSON runs exit differently), json_invalid (not strict JSON:
`NaN`/`Infinity` rejected), json_nonfinite (a float literal that overflows to inf), json_int_beyond_2^53 (an
integer no JSON reader holds exactly; the bound `parsers.events.sane` uses), lines_not_conserved, bulk_differs
(the columnar reader's document differs from the per-line one's beyond the probe folding that
tests/pipeline/test_bulk_differential.py documents), control_char_text / control_char_json / control_char_csv
(C0 but \\n and \\t, DEL, C1, bidi U+202A-E and U+2066-9 raw in an output; JSON escapes C0 itself),
parser_exception, parser_type (a return value that is not of its annotated type), nul_padding_changes_events
(a run of NULs glued before a line changes what it says), framing (chunking or the columnar splitter changes
the lines), slow_line (one line over SLOW_LINE_S in a parser), glued_records_lost, hang (a case over HANG_S),
and in the campaign memory (a worker's peak RSS past its MEMORY_MB).

Line conservation: the JSON gives, per source, `lines` (read) and `unparsed_lines`; the parsed ones are the
rest, so "parsed + unparsed = lines read" holds when `lines` is the file's physical line count (every "\\n",
plus a last line without one) and 0 <= `unparsed_lines` <= `lines`: both are checked.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
import traceback
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tests.robustness.fuzzing.seeds import ROOT

HANG_S = 10.0
"""A case that runs longer than this is a hang (the campaign kills its worker; the tests' alarm raises)."""
SLOW_LINE_S = 2.0
"""One line that takes a parser this long is a defect: the framing caps a line at 1 MiB, and the parsers read
tens of MB/s, so 2 s is two orders of magnitude of slack (a loaded CI machine included)."""


class CaseTimeout(BaseException):
    """Raised by the watchdog's alarm (run.watchdog): a BaseException so no `except Exception` in the product
    swallows it."""


CONTROL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("C0", re.compile(r"[\x00-\x08\x0b-\x1f]")),
    ("DEL", re.compile(r"\x7f")),
    ("C1", re.compile(r"[\x80-\x9f]")),
    ("bidi", re.compile(r"[\u202a-\u202e\u2066-\u2069]")),
)


def control_chars(text: str, allow_c0: bool = False) -> list[tuple[str, str, str]]:
    """(class, codepoint, context) for each class of terminal control character found in `text`."""
    found = []
    for name, pattern in CONTROL_CLASSES:
        if name == "C0" and allow_c0:
            continue
        m = pattern.search(text)
        if m is not None:
            found.append((name, f"U+{ord(m.group()):04X}", text[max(0, m.start() - 30): m.end() + 30]))
    return found


@dataclass(frozen=True)
class Violation:
    kind: str
    key: str
    """What makes two violations the same defect (exception and innermost frame, JSON path, char class...)."""
    detail: str
    mode: str = ""
    """The analyze run it came from (text, json, json_all, csv, json_win, json_all_win), "" elsewhere."""

    @property
    def signature(self) -> str:
        return f"{self.kind}[{self.key}]"


def exc_key(exc: BaseException) -> str:
    """`ExcType@file:function` of the innermost frame in ietop/ or parsers/ (line numbers drift with edits)."""
    where = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        rel = os.path.relpath(frame.filename, ROOT)
        if rel.startswith(("ietop" + os.sep, "parsers" + os.sep)):
            where = f"{rel.replace(os.sep, '/')}:{frame.name}"
    return f"{type(exc).__name__}@{where}"


def exc_detail(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    at = f" (at {os.path.relpath(last.filename, ROOT)}:{last.lineno} in {last.name})" if last else ""
    return (traceback.format_exception_only(type(exc), exc)[-1].strip() + at)[:500]


# ------------------------------------------------------------------------------------------------- JSON


def physical_lines(data: bytes) -> int:
    """Lines as a reader of the file counts them: every "\\n", plus a last line without one, unless that last
    piece is only NULs: padding a writer has not yet written over (copytruncate), not a line
    (parsers/text/framing.py)."""
    tail = data[data.rfind(b"\n") + 1:]
    return data.count(b"\n") + (1 if tail.strip(b"\x00") else 0)


def _path_of(prefix: str, key: object) -> str:
    return f"{prefix}[]" if isinstance(key, int) else (f"{prefix}.{key}" if prefix else str(key))


def _walk(value: object, path: str = "") -> Iterator[tuple[str, object]]:
    """(path with list indices collapsed to [], leaf) for each leaf of a JSON document."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, _path_of(path, k))
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, _path_of(path, 0))
    else:
        yield path, value


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-JSON constant {name}")


def _lenient(text: str) -> Any:
    return json.loads(text, parse_constant=float)


def check_json_text(text: str, mode: str) -> tuple[Any, list[Violation]]:
    """Strict JSON (no NaN/Infinity), finite floats, integers within ±2**53, no raw C1/DEL/bidi in it.
    Returns the document (parsed leniently when it is not strict JSON; None when not JSON at all)."""
    out: list[Violation] = []
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        try:
            doc = _lenient(text)
        except ValueError:
            return None, [Violation("json_invalid", "not JSON", str(exc)[:300], mode)]
        bad = sorted({p for p, v in _walk(doc) if isinstance(v, float) and not math.isfinite(v)})
        for p in bad or ["?"]:
            out.append(Violation("json_invalid", p, f"{exc}"[:200], mode))
        return doc, out
    seen: set[str] = set()
    # Escaped (\\u009b) is fine: only a control character written raw in the text reaches a terminal that
    # shows the document; which field held it is found in the decoded strings.
    raw = {cls for cls, _cp, _ctx in control_chars(text, allow_c0=True)}
    for p, v in _walk(doc):
        if isinstance(v, float) and not math.isfinite(v) and ("f" + p) not in seen:
            seen.add("f" + p)
            out.append(Violation("json_nonfinite", p, f"{v!r} (a float literal that overflows)", mode))
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53 and ("i" + p) not in seen:
            seen.add("i" + p)
            out.append(Violation("json_int_beyond_2^53", p, f"{str(v)[:40]}… ({len(str(v))} digits)", mode))
        elif isinstance(v, str) and raw:
            for cls, cp, ctx in control_chars(v, allow_c0=True):
                if cls in raw and (cls + p) not in seen:
                    seen.add(cls + p)
                    out.append(Violation("control_char_json", f"{cls} in {p}", f"{cp} in {ctx!r}", mode))
    return doc, out


# ------------------------------------------------------------------------------------------------ lines


def check_lines(doc: dict[str, Any], files: Sequence[bytes], mode: str) -> list[Violation]:
    out: list[Violation] = []
    sources = doc.get("sources")
    if not isinstance(sources, list) or len(sources) != len(files):
        return [Violation("lines_not_conserved", "sources", f"{len(files)} files, sources={sources!r:.200}", mode)]
    for src, data in zip(sources, files):
        lines, unparsed = src.get("lines"), src.get("unparsed_lines")
        want = physical_lines(data)
        engine = src.get("engine")
        if lines != want:
            out.append(Violation("lines_not_conserved", f"lines != physical lines ({engine}, {src.get('format')})",
                                 f"lines={lines} physical={want}", mode))
        if not isinstance(unparsed, int) or not isinstance(lines, int) or not 0 <= unparsed <= lines:
            out.append(Violation("lines_not_conserved", f"unparsed_lines outside [0, lines] ({engine})",
                                 f"unparsed_lines={unparsed} lines={lines}", mode))
    return out


def same_facts(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """tests/pipeline/test_bulk_differential.py's contract: the first key where the columnar reader's document
    differs from the per-line one's (apart from the folding of probes), or None."""
    from collections import Counter

    from ietop.model.probes import is_probe

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["source"]["path"], r["method"], r["path"], r["status"])

    try:
        # A request without a status (a GIN line with `|0|`) is never a probe.
        probe = [r["status"] is not None and is_probe(r["method"], r["status"], r["inference"])
                 for r in old["requests"]]
        listed = [r for r, p in zip(old["requests"], probe) if not p]
        folded = Counter(key(r) for r, p in zip(old["requests"], probe) if p)
        if json.dumps(new["requests"], sort_keys=True) != json.dumps(listed, sort_keys=True):
            return "requests"
        if {(p["source"], p["method"], p["path"], p["status"]): p["count"] for p in new["probes"]} != dict(folded):
            return "probes"
    except (KeyError, TypeError) as exc:
        return f"shape ({exc!r})"
    for k in old:
        if k not in ("requests", "probes") and json.dumps(new.get(k), sort_keys=True) != json.dumps(old[k], sort_keys=True):
            return k
    return None


# ------------------------------------------------------------------------------------------ type checks


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve here: nothing to check it against
        return {}


def _conforms(value: object, ann: Any) -> bool:
    if ann is Any or ann is object:
        return True
    if ann is None or ann is type(None):
        return value is None
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union or origin is types.UnionType:
        return any(_conforms(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(_conforms(v, a) for v, a in zip(value, args)))
    if origin in (list, set, frozenset):
        return isinstance(value, origin) and (not args or all(_conforms(v, args[0]) for v in value))
    if origin is dict:
        return isinstance(value, dict) and (not args or all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()))
    if ann is float:  # PEP 484's numeric tower: an int is a float
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(ann, type):
        return isinstance(value, ann)
    return True  # Callable, TypeVar, a string that did not resolve: not checked


def type_errors(obj: object, where: str = "", depth: int = 0) -> list[str]:
    """Fields of a dataclass (recursively, and through tuples of them) whose value is not of its annotation."""
    if depth > 4:
        return []
    if isinstance(obj, (tuple, list)):
        return [e for i, item in enumerate(obj) for e in type_errors(item, f"{where}[{i}]", depth + 1)][:5]
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return []
    errors: list[str] = []
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        ann = hints.get(f.name)
        if ann is not None and not _conforms(value, ann):
            errors.append(f"{where}{type(obj).__name__}.{f.name}={value!r:.80} is not {ann}")
        errors.extend(type_errors(value, f"{where}{type(obj).__name__}.{f.name}", depth + 1))
    return errors
