"""One ``journalctl -o json`` record → (time, message text).

``ietop --journal UNIT`` reads the journal as JSON rather than as text: the time is exact
(``__REALTIME_TIMESTAMP``, microseconds since the epoch, UTC) and the message arrives without the
``Mon DD HH:MM:SS host unit[pid]:`` prefix that the text output adds and that would have to be stripped
with a year-less, zone-less guess. The message then goes through the same engine parsers as a log line.

journalctl's JSON encoding of a field (systemd.journal-fields(7), journalctl(1) ``--output=json``):
a UTF-8 string; an array of byte values when the data is not valid UTF-8 or has control characters;
null when the field is too large to be shown (over 4096 bytes, unless ``--all``); and an array of such
values when a record has the field more than once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

__all__ = ["journal_record"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MAX_USEC = 253402300799999999
"""9999-12-31T23:59:59.999999Z: beyond this a datetime cannot hold the time."""


def _message(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(b, int) and not isinstance(b, bool) for b in value):
        try:
            return bytes(value).decode("utf-8", errors="replace")
        except ValueError:  # a "byte" outside 0..255
            return ""
    if isinstance(value, list) and value:
        # The field repeated: the first value is the record's message (later ones are rare duplicates).
        return _message(value[0])
    return ""  # null (too large to show), missing, or not a message at all


def _time(value: object) -> datetime | None:
    if isinstance(value, str) and value.isascii() and value.isdigit():
        usec = int(value)
        if usec <= _MAX_USEC:
            return _EPOCH + timedelta(microseconds=usec)
    return None


def journal_record(text: str) -> tuple[datetime | None, str] | None:
    """Parse one line of ``journalctl -o json`` output.

    Returns (time as an aware UTC datetime, or None when the record has no readable
    ``__REALTIME_TIMESTAMP``; the MESSAGE text without its trailing newline, "" when absent or too
    large to show), or None when the line is not a JSON object (journalctl's own complaints on stderr,
    such as "No journal files were found.", come through the same source).
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    return _time(doc.get("__REALTIME_TIMESTAMP")), _message(doc.get("MESSAGE")).rstrip("\r\n")
