"""One JSON log record of vLLM (a JSON formatter: vLLM's own `formatter json`, or any python-json-logger config
given by `VLLM_LOGGING_CONFIG_PATH` / `--log-config-file`) → the text lines vLLM's default format would have
printed for it, so that one grammar reads both.

python-json-logger writes the LogRecord attributes its format names: vLLM 0.32's JSON format is
`%(asctime)s %(levelname)s %(name)s %(processName)s %(process)d %(message)s` (vllm/logging_utils/formatter.py),
and vLLM applies the same formatter to uvicorn's loggers, whose access record then has a time. A config may
name others (`filename`, `lineno`, `funcName`…) or rename them (`rename_fields`: `levelname` → `level`,
`asctime` → `time`/`timestamp`); a traceback comes as `exc_info` (or `exc_text`/`stack_info`), one record.

Pure: standard library only.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"})
_TIME_KEYS = ("asctime", "time", "timestamp", "@timestamp", "ts")
_LEVEL_KEYS = ("levelname", "level", "severity", "log.level")
_MESSAGE_KEYS = ("message", "msg")
_TRACE_KEYS = ("exc_info", "exc_text", "stack_info")
# `2026-11-29 15:51:55,123` (logging's asctime), `2026-11-29T15:51:55.123456+00:00` (ISO): the clock as printed.
_TIME_RE = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,6}))?")
_UVICORN = "uvicorn"


def _first(doc: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in doc:
            return doc[key]
    return None


def json_record(text: str) -> tuple[list[str], datetime | None] | None:
    """The default-format lines of one JSON record and its time as printed (naive), or None when `text` is no
    JSON log record. A uvicorn record becomes uvicorn's own `LEVEL:     message` line (its access line then is
    the one vLLM's access grammar reads; the time is the record's, which uvicorn's text line lacks); any other
    becomes `[(<process> pid=N) ]LEVEL YYYY-MM-DD hh:mm:ss[.ffffff] [<file>:<line>] <message>`, one line per line
    of the message and of its traceback, each with the same prefix, as vLLM's own NewLineFormatter writes a
    multi-line record."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    message = _first(doc, _MESSAGE_KEYS)
    level = _first(doc, _LEVEL_KEYS)
    if not isinstance(message, str) or not isinstance(level, str) or level.upper() not in _LEVELS:
        return None
    level = level.upper()
    raw_name = doc.get("name")
    name = raw_name if isinstance(raw_name, str) else ""
    body = message.splitlines() or [""]
    trace = _first(doc, _TRACE_KEYS)
    if isinstance(trace, str) and trace:
        body += trace.splitlines()
    stamp = _TIME_RE.match(str(_first(doc, _TIME_KEYS) or ""))
    when = None
    if stamp is not None:
        try:
            when = datetime.fromisoformat(f"{stamp.group(1)}T{stamp.group(2)}.{(stamp.group(3) or '').ljust(6, '0')}")
        except ValueError:
            stamp = None
    if name == _UVICORN or name.startswith(_UVICORN + "."):
        # uvicorn's text format prefixes the message only; a traceback follows it raw.
        return [f"{level}:     {body[0]}", *body[1:]], when
    if stamp is None:
        return None  # a vLLM record's grammar needs a time: what a record without one says cannot be placed
    # Six digits: the grammar reads up to three as milliseconds (`%(msecs)d`), six as microseconds.
    clock = f"{stamp.group(1)} {stamp.group(2)}" + (f".{stamp.group(3).ljust(6, '0')}" if stamp.group(3) else "")
    where = doc.get("filename") or (name.rsplit(".", 1)[-1] + ".py" if name else "json.py")
    line = doc.get("lineno")
    # vLLM's text format names the process (`(EngineCore pid=563) `) by its own record attribute; the JSON
    # format has the multiprocessing name (`MainProcess` for the API server). Tracebacks of two processes
    # interleave: the prefix keeps them apart.
    process, pid = doc.get("vllm_process_name") or doc.get("processName"), doc.get("process")
    proc = f"({process} pid={pid}) " if isinstance(pid, int) and isinstance(process, str) and process else ""
    head = f"{proc}{level} {clock} [{str(where).replace(' ', '_')}:{line if isinstance(line, int) else 0}] "
    return [head + part for part in body], when
