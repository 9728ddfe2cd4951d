"""Re-wrap a real vLLM text log as the JSON log a python-json-logger formatter would have written (the SYNTHETIC
fixture fixtures/vllm/synthetic-json-basic-server.log; see fixtures/vllm/README.md).

    .venv/bin/python tests/parsers/rewrap_vllm_json.py fixtures/vllm/real-basic-server.log 2026 > out.log

Each record line becomes one JSON object with the keys of vLLM 0.32's JSON format (vllm/logging_utils/
formatter.py: asctime, levelname, name, processName, process, message) plus filename and lineno, as a
`VLLM_LOGGING_CONFIG_PATH` config may add. What the text does not carry is made up, and only that: the year (the
argument), milliseconds (`,000`), the logger name (`vllm.<file stem>`; vLLM's are full module paths) and the time
of uvicorn's records (the last record's: its text lines have none). An ERROR record's following lines with the
same prefix are its traceback (vLLM's NewLineFormatter repeats the prefix): they go into `exc_info`, as
`logger.exception` gives them to a JSON formatter. Lines printed outside logging (warnings, tqdm bars, raw
tracebacks of child processes) stay as they are: no formatter sees them.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

RECORD = re.compile(r"(?:\((\S+) pid=(\d+)\) )?(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}) "
                    r"\[([^\]:]+):(\d+)\] ?(.*)")
UVICORN = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL): +(.*)")
ACCESS = re.compile(r'(\S+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3})(?: .*)?')


def rewrap(lines: list[str], year: int) -> list[str]:
    out: list[str] = []
    last: dict[str, Any] | None = None
    last_key: tuple[str, ...] | None = None
    asctime = f"{year}-01-01 00:00:00,000"
    for text in lines:
        m = RECORD.fullmatch(text)
        if m is not None:
            proc, pid, level, day, clock, where, lineno, msg = m.groups()
            key = (proc or "", pid or "", level, day, clock, where, lineno)
            if last is not None and key == last_key and level in ("ERROR", "CRITICAL"):
                last["exc_info"] = f"{last['exc_info']}\n{msg}" if "exc_info" in last else msg
                continue
            flush(out, last)
            asctime = f"{year}-{day} {clock},000"
            last = {"asctime": asctime, "levelname": level, "name": f"vllm.{where.rsplit('/', 1)[-1][:-3]}",
                    "processName": proc or "MainProcess", "process": int(pid) if pid else 0,
                    "filename": where.rsplit("/", 1)[-1], "lineno": int(lineno), "message": msg}
            last_key = key
            continue
        flush(out, last)
        last, last_key = None, None
        u = UVICORN.fullmatch(text)
        if u is not None:
            level, msg = u.groups()
            a = ACCESS.fullmatch(msg)
            # uvicorn's access record: the message has no reason phrase (uvicorn's text formatter adds it).
            name = "uvicorn.access" if a is not None else "uvicorn.error"
            out.append(json.dumps({"asctime": asctime, "levelname": level, "name": name, "processName": "MainProcess",
                                   "process": 0, "message": a.group(1) if a is not None else msg},
                                  ensure_ascii=False))
            continue
        out.append(text)
    flush(out, last)
    return out


def flush(out: list[str], record: dict[str, Any] | None) -> None:
    if record is not None:
        out.append(json.dumps(record, ensure_ascii=False))


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        text_lines = fh.read().splitlines()
    sys.stdout.write("\n".join(rewrap(text_lines, int(sys.argv[2]))) + "\n")
