"""Fuzz mutations: a `Recipe` takes a window of one seed's lines (seeds.py), which is then mutated by operations
that keep the line structure (`OPS`): hostile numbers (400 and 5,001 digits, negative, NaN/inf spellings,
non-ASCII digits), cut/duplicated/reordered/deleted lines, swapped and impossible timestamps, C0/C1/DEL/bidi
controls and escape sequences, invalid UTF-8, NUL padding (logrotate's copytruncate), very long lines, and engine
fields (model names, token counts, durations, status codes) replaced by hostile values.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tests.robustness.fuzzing.seeds import Seed

MAX_WINDOW = 80
"""Lines of a seed one case starts from: enough for a load to span its lines, small enough for ~20 cases/s."""
MAX_OPS = 6
MAX_INPUT = 16 << 20
"""Bytes of one case's input, at most (see materialize)."""

DIGITS_400 = b"9" * 400
NUMBERS: tuple[bytes, ...] = (
    DIGITS_400, b"-" + DIGITS_400, DIGITS_400 + b".5", b"1" + b"0" * 5000,  # beyond int()'s 4,300-digit limit
    b"1e309", b"Infinity", b"NaN", "１２３".encode(), "²".encode(), b"9007199254740993",
    b"18446744073709551616", b"9223372036854775808", b"-9223372036854775809", b"4294967296", b"2147483648",
    b"-1", b"-0", b"0", b"0.0", b"-1e309", b"1e-400", b"nan", b"inf", b"-inf", b"1_000", b"0x10",
    "٣٤٥".encode(), b"1.2.3", b".", b"", b"00000000000000000000000001", b"1e3", b"-0.000001", b"3.4028235e38",
)
HOSTILE_FIRST = 10
"""Half the draws (`_number`) take one of the first HOSTILE_FIRST NUMBERS, the values that overflow or are not
numbers, and half of those one of the first five (400 digits and the float overflows)."""
"""Hostile numbers: overflow as a float, beyond int64 and 2**53, not numbers at all, or digits that `\\d` and
`int()` accept but ASCII does not (Arabic-Indic, fullwidth), or that `\\d` takes and `int()` refuses (²)."""

CONTROLS: tuple[bytes, ...] = (
    b"\x00", b"\x01", b"\x07", b"\x08", b"\x0b", b"\x0c", b"\r", b"\x1b", b"\x1b[2J", b"\x1b]0;pwned\x07",
    b"\x1b[31m", b"\x1c", b"\x1d", b"\x1e", b"\x7f", "\u0085".encode(), "\u009b".encode(), "\u008d".encode(),
    "\u009c".encode(), "\u202a".encode(), "\u202b".encode(), "\u202c".encode(), "\u202d".encode(),
    "\u202e".encode(), "\u2066".encode(), "\u2067".encode(), "\u2068".encode(), "\u2069".encode(),
    "\u200b".encode(), "\ufeff".encode(), "\u2028".encode(), "\u2029".encode(), b"\xff", b"\xfe", b"\xc0\x80",
    b"\xed\xa0\x80", b"\xe2\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xc2", b"\x9b", b"\t", b'"', b"\\", b"%s%n",
    b"{", b"}", b"[", b"]", b"|",
)
"""C0 (ESC, SOH: the separator the columnar reader splits on), DEL, C1 (NEL splits `str.splitlines`), bidi
overrides and isolates, zero-width and line-separator characters, invalid UTF-8, and the quoting characters
of the formats the parsers read."""

NUL_RUNS = (1, 8, 511, 4096)
LONG_LINES = (300, 5000, 70_000, (1 << 20) + 3)
"""The last is over the framing's 1 MiB line limit, so the line is cut."""

MODEL_NAMES: tuple[bytes, ...] = (
    b"", b"m" * 5000, b"[bold red]m[/bold red]", b"\x1b[2Jm", "m\u202eevil".encode(), b"sha256-" + b"0" * 64,
    b"../../etc/passwd", "模型:7b".encode(), b'a"b', b"a\\", b"\xff\xfe", "\u0085m".encode(), b"null", b"0",
)
STATUSES: tuple[bytes, ...] = (b"0", b"999", b"1000", b"-1", b"99999999999", b"2OO", b"", b"200.5", DIGITS_400)

# (pattern with the value as group 2, values). Engine-specific fields: the values the model trusts.
FIELDS: tuple[tuple[re.Pattern[bytes], tuple[bytes, ...]], ...] = (
    (re.compile(rb"((?:\bmodel|\bmodel_name|served_model_name|\bname)[\"']?\s*[=:]\s*[\"']?)([^\"'\s,)}]+)"),
     MODEL_NAMES),
    (re.compile(rb"(\| +)(\d{3})( +\|)"), STATUSES),
    (re.compile(rb"(HTTP/\d\.\d\"? )(\d{3})"), STATUSES),
    (re.compile(rb"(\"status\"\s*:\s*)(\d+)"), STATUSES),
    (re.compile(rb"((?:tokens?|prompt|limit|keep|new|n_ctx(?:_slot|_train)?|task\.n_tokens|n_tokens|prompt_tokens|"
                rb"completion_tokens|total_tokens|num_ctx|n_past|count|n_decoded|size|size_vram|max_model_len)"
                rb"[\"']?\s*[=:]\s*)(\d+)"), NUMBERS),
    (re.compile(rb"((?:started in |load_duration[\"']?\s*[=:]\s*|time = +|duration=|took |elapsed[=: ]+))"
                rb"([0-9.]+)"), NUMBERS),
    (re.compile(rb"(/ +)(\d+)( (?:tokens|runs))"), NUMBERS),
    (re.compile(rb"(\| +)([0-9.]+(?:h|m|s|ms|\xc2\xb5s|us|ns)[0-9.hmsun\xc2\xb5]*)( +\|)"),
     (DIGITS_400 + b"h", b"2562047h47m16.854775808s", b"-1h", b"1.5.5s", b"NaNs", b"1e309s", b"5us",
      "5μs".encode(), b"0", b"")),
)

_NUMBER_RE = re.compile(rb"-?\d+(?:\.\d+)?")
_TS_RES: tuple[tuple[re.Pattern[bytes], tuple[bytes, ...]], ...] = (
    (re.compile(rb"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
     (b"0000-00-00T00:00:00Z", b"9999-12-31T23:59:59.999999999+14:00", b"2025-02-30T25:61:61Z",
      b"2025-13-01T00:00:00-99:99", b"0001-01-01T00:00:00Z", b"2025-06-10T21:22:18.31415926535897932384Z",
      b"1970-01-01T00:00:00Z", b"2038-01-19T03:14:08Z", b"9999-12-31T23:59:59-23:59", b"0001-01-01T00:00:00+14:00")),
    (re.compile(rb"\d{4}/\d{2}/\d{2} - \d{2}:\d{2}:\d{2}"),
     (b"0000/00/00 - 00:00:00", b"9999/12/31 - 23:59:60", b"2025/02/29 - 24:00:00", b"0001/01/01 - 00:00:00")),
    (re.compile(rb"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}"), (b"0000/00/00 00:00:00", b"9999/12/31 23:59:60")),
    (re.compile(rb"\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), (b"00-00 00:00:00", b"02-29 23:59:59", b"13-45 99:99:99")),
    (re.compile(rb"\b[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}"), (b"Feb 30 25:61:61", b"Xyz 99 00:00:00")),
    (re.compile(rb"\b1\d{9}(?:\.\d+)?\b"), (b"0", b"-1", b"99999999999999999999", b"1e309")),
)

OPS = ("number", "number_all", "field", "cut", "delete", "dup", "swap", "move", "inject", "nul_pad", "nul_line",
       "long", "ts_swap", "ts_hostile", "splice", "crlf", "byte", "blank")
OP_DECK = (*OPS, "number", "number", "field", "field", "field", "inject", "nul_pad")
"""What a case draws operations from: the value rewrites (`field`, `number`), which find most defects, and the
control/padding injections weigh more than the line moves."""
Op = tuple[str, int, int]
"""(operation, line position, argument): plain ints, so hypothesis shrinks them and a campaign stores them."""


@dataclass(frozen=True)
class Recipe:
    """A window of one seed and the operations applied to it (positions are taken modulo the line count)."""

    seed: int
    start: int
    length: int
    ops: tuple[Op, ...] = ()
    newline: bool = True
    """Whether the file ends with a newline (a cut last line is how a live log is often saved)."""


def _number(arg: int) -> bytes:
    i = arg % (2 * len(NUMBERS))
    return NUMBERS[i] if i < len(NUMBERS) else NUMBERS[(i - len(NUMBERS)) % (HOSTILE_FIRST // 2 * (1 + i % 2))]


def _applies(name: str, line: bytes, arg: int) -> bool:
    """Whether an operation that rewrites a part of a line finds that part in `line` (for `field`, the field
    `arg` names first: each kind of field gets its share, not only the kinds most lines have)."""
    if name in ("number", "number_all"):
        return _NUMBER_RE.search(line) is not None
    if name == "field":
        return _field_pattern(arg).search(line) is not None
    if name in ("ts_hostile", "ts_swap"):
        return _timestamp(line) is not None
    return True


def _replace_nth(pattern: re.Pattern[bytes], line: bytes, n: int, value: bytes, group: int = 0) -> bytes:
    matches = list(pattern.finditer(line))
    if not matches:
        return line
    m = matches[n % len(matches)]
    return line[: m.start(group)] + value + line[m.end(group):]


def _field_pattern(arg: int) -> re.Pattern[bytes]:
    return FIELDS[arg % len(FIELDS)][0]


def _field(line: bytes, arg: int) -> bytes:
    for i in range(len(FIELDS)):
        pattern, values = FIELDS[(arg + i) % len(FIELDS)]
        m = pattern.search(line)
        if m is not None:
            value = _number(arg // len(FIELDS)) if values is NUMBERS else values[arg // len(FIELDS) % len(values)]
            return line[: m.start(2)] + value + line[m.end(2):]
    return _replace_nth(_NUMBER_RE, line, 0, _number(arg))


TS_SCAN = 4096
"""Where a line's timestamp is looked for: its head. A whole-line search over the long digit runs other operations
write took 69 s for one case (a "hang" of the harness, not of ietop, in run 5)."""


def _timestamp(line: bytes) -> tuple[int, re.Match[bytes]] | None:
    head = line[:TS_SCAN]  # offsets into the head are offsets into the line
    for i, (pattern, _) in enumerate(_TS_RES):
        m = pattern.search(head)
        if m is not None:
            return i, m
    return None


def apply_op(lines: list[bytes], op: Op, pool: Sequence[Seed]) -> None:
    """Apply one operation in place. Every operation keeps the file a sequence of lines (none inserts a "\\n"
    into a line except `nul_line`/`splice`/`dup`, which add whole lines)."""
    name, pos, arg = op
    if not lines:
        lines.append(b"")
    i = pos % len(lines)
    # An operation on a part of a line takes the first line from `pos` on that has that part: most lines of a
    # log have no token count, and a no-op case is a wasted case.
    i = next((j % len(lines) for j in range(i, i + len(lines)) if _applies(name, lines[j % len(lines)], arg)), i)
    line = lines[i]
    if name == "number":
        lines[i] = _replace_nth(_NUMBER_RE, line, arg // len(NUMBERS), _number(arg))
    elif name == "number_all":
        value = _number(arg)
        lines[i] = _NUMBER_RE.sub(lambda _m: value, line)
    elif name == "field":
        lines[i] = _field(line, arg)
    elif name == "cut":
        lines[i] = line[: arg % (len(line) + 1)]
    elif name == "delete":
        del lines[i]
    elif name == "dup":
        lines.insert(i, line)
    elif name == "swap":
        j = arg % len(lines)
        lines[i], lines[j] = lines[j], lines[i]
    elif name == "move":
        del lines[i]
        lines.insert(arg % (len(lines) + 1), line)
    elif name == "inject":
        ctrl = CONTROLS[arg % len(CONTROLS)]
        at = (arg // len(CONTROLS)) % (len(line) + 1)
        lines[i] = line[:at] + ctrl + line[at:]
    elif name == "nul_pad":
        lines[i] = b"\x00" * NUL_RUNS[arg % len(NUL_RUNS)] + line
    elif name == "nul_line":
        lines.insert(i, b"\x00" * NUL_RUNS[arg % len(NUL_RUNS)])
    elif name == "long":
        size = LONG_LINES[arg % len(LONG_LINES)]
        unit = line or b"x"
        lines[i] = (unit * (size // len(unit) + 1))[:size]
    elif name == "ts_swap":
        j = arg % len(lines)
        a, b = _timestamp(line), _timestamp(lines[j])
        if a is not None and b is not None and i != j:
            ma, mb = a[1], b[1]
            lines[i] = line[: ma.start()] + mb.group() + line[ma.end():]
            other = lines[j]
            lines[j] = other[: mb.start()] + ma.group() + other[mb.end():]
    elif name == "ts_hostile":
        found = _timestamp(line)
        if found is not None:
            values = _TS_RES[found[0]][1]
            m = found[1]
            lines[i] = line[: m.start()] + values[arg % len(values)] + line[m.end():]
    elif name == "splice":
        donor = pool[arg % len(pool)]
        if donor.lines:
            lines.insert(i, donor.lines[(arg // len(pool)) % len(donor.lines)])
    elif name == "crlf":
        lines[i] = line + b"\r"
    elif name == "byte":
        if line:
            at = (arg >> 8) % len(line)
            lines[i] = line[:at] + bytes([arg & 0xFF]) + line[at + 1:]
    elif name == "blank":
        lines.insert(i, (b"", b" ", b"\t", b"   \r")[arg % 4])


def materialize(recipe: Recipe, pool: Sequence[Seed], deck: Sequence[int] = ()) -> bytes:
    """The recipe's bytes: `recipe.seed` indexes `deck` (seed_deck) when given, else `pool`."""
    seed = pool[deck[recipe.seed % len(deck)] if deck else recipe.seed % len(pool)]
    start = recipe.start % max(1, len(seed.lines))
    lines = list(seed.lines[start: start + max(1, recipe.length)])
    for op in recipe.ops:
        apply_op(lines, op, pool)
    data = b"\n".join(lines)
    if len(data) > MAX_INPUT:
        # Compounded ops (every number made 5,000 digits, then lines repeated) reached 763 MB: a case that size
        # measures the machine, not a defect, and its 10 s limit and 1 GB memory cap flag it for that.
        cut = data.rfind(b"\n", 0, MAX_INPUT)
        data = data[:cut if cut > 0 else MAX_INPUT]
    return data + b"\n" if recipe.newline and lines else data


def random_recipe(rng: random.Random, n_seeds: int, max_window: int = MAX_WINDOW, max_ops: int = MAX_OPS) -> Recipe:
    """The campaign's draw: the same shape hypothesis draws (`recipes`), from a seeded generator."""
    ops = tuple((rng.choice(OP_DECK), rng.randrange(1 << 16), rng.randrange(1 << 20)) for _ in range(rng.randint(1, max_ops)))
    length = rng.randint(1, max_window) if rng.random() < 0.9 else rng.randint(1, 4 * max_window)
    return Recipe(rng.randrange(n_seeds), rng.randrange(1 << 16), length, ops, rng.random() < 0.85)
