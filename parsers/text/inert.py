"""Characters of untrusted log text that must not reach a human-facing output as themselves.

Log text (model names, paths, client addresses, messages, prompts) is written by whoever can reach the
server. Printed raw, some characters act instead of showing:

- C0 controls (but tab and newline, which every output lays out itself), DEL and C1 (U+0080–U+009F): a
  terminal interprets them. ESC and the 8-bit CSI (U+009B), OSC (U+009D), DCS (U+0090) start sequences
  that recolour, retitle, move the cursor or write the clipboard.
- Bidirectional formatting (U+202A–U+202E, U+2066–U+2069) and marks (U+200E, U+200F, U+061C): they
  reorder what follows, so a line reads differently from what it holds (Trojan Source, CVE-2021-42574).
- U+2028 and U+2029: Python's and Rich's line splitting break on them, so one record spills into the next
  row of a one-line table.
- Characters that render as nothing (soft hyphen, zero-width space, word joiner and the invisible
  operators, the deprecated format controls U+206A–U+206F, U+FEFF, interlinear annotation U+FFF9–U+FFFB,
  tag characters U+E0000–U+E007F): two different model names print alike, or text is smuggled past the
  reader (tag characters carry hidden ASCII in prompts).
- Lone surrogates: a file name that is not UTF-8 arrives surrogate-escaped and cannot be encoded for
  output at all (printing it raises).

Zero-width joiner and non-joiner (U+200C, U+200D) and variation selectors pass: scripts and emoji need
them, and they only change how their neighbours join, never what is shown or in which order.

Every character listed is non-printable to `str.isprintable`: the outputs' fast paths rely on that
(tests/parsers/test_inert.py checks it). Stdlib only, as every module of `parsers`.
"""

from __future__ import annotations

import re

RANGES: tuple[tuple[int, int], ...] = (
    (0x00, 0x08), (0x0B, 0x1F),  # C0 but tab and newline
    (0x7F, 0x9F),  # DEL, C1
    (0x061C, 0x061C), (0x200E, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069),  # bidi
    (0x2028, 0x2029),  # line and paragraph separators
    (0x00AD, 0x00AD), (0x200B, 0x200B), (0x2060, 0x2065), (0x206A, 0x206F), (0xFEFF, 0xFEFF),  # invisible
    (0xFFF9, 0xFFFB), (0xE0000, 0xE007F),
    (0xD800, 0xDFFF),  # lone surrogates
)
"""The forbidden code points, first and last of each range (see the module's doc)."""


def _class(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    return re.compile("[" + "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in ranges) + "]")


FORBIDDEN = _class(RANGES)
"""One character that must not reach a human-facing output as itself."""
_RAW_IN_JSON = _class(tuple(r for r in RANGES if r[0] > 0x1F))
"""What an encoder with `ensure_ascii=False` leaves raw of FORBIDDEN: it escapes every C0 control in a string,
and outside strings C0 is whitespace between tokens, which must stay as it is."""


def characters() -> list[str]:
    """Every forbidden character but the surrogates, for a literal replacement where no regex with a callback
    is at hand (polars' `str.replace_many`: its strings are UTF-8, which cannot hold a surrogate)."""
    return [chr(c) for first, last in RANGES if first < 0xD800 or first > 0xDFFF for c in range(first, last + 1)]


def stand_in(char: str) -> str:
    """What a forbidden character shows as: ESC as "␛" (the dashboard always showed it so), the rest as the
    Python escape of its code point. Distinct characters get distinct stand-ins."""
    code = ord(char)
    if code == 0x1B:
        return "␛"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _visible(match: re.Match[str]) -> str:
    return stand_in(match.group())


def visible(text: str) -> str:
    """`text` with every forbidden character replaced by its visible stand-in; tab and newline kept."""
    # Nearly every text is printable: one C scan instead of the regex's slower one.
    if text.isprintable():
        return text
    return FORBIDDEN.sub(_visible, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    # JSON's \u escapes name UTF-16 code units: a character past the BMP is a surrogate pair.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escape_json(text: str) -> str:
    """Serialized JSON with every forbidden character escaped as `\\uXXXX`: the document decodes to the same
    values, and no forbidden character is in its text.

    `text` must be JSON as an encoder writes it: every forbidden character it holds raw is then inside a string
    and not after an escaping backslash, so an escape can take its place."""
    # A report of millions of records goes through here: ASCII text (most of it) can only hold DEL, which
    # one C search rules out; printable text holds nothing forbidden either (checked faster than the regex).
    if text.isascii():
        if "\x7f" not in text:
            return text
    elif text.isprintable():
        return text
    return _RAW_IN_JSON.sub(_json_escape, text)
