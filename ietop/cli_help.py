"""The examples and notes at the end of each `ietop … --help` (issue 22).

Every line of an `examples:` block that starts with `ietop` is a command that parses as written (up to a
shell redirection): tests/cli/test_help_examples.py feeds each one to the parser, so an example cannot go
stale when a flag is renamed.
"""

from __future__ import annotations

import argparse
from typing import Any

CONFIG_NOTE = """\
defaults: flags can be remembered in $XDG_CONFIG_HOME/ietop/config.toml (~/.config/ietop/config.toml);
  flags given here override the file; --config PATH reads another file, --no-config none (see README)."""

EPILOGS: dict[str | None, str] = {
    None: f"""\
examples:
  ietop                                   # find Ollama, vLLM and MLX on this host and watch them
  ietop --ollama http://gpu-box:11434 --log ollama:/var/log/ollama/server.log
  ietop --vllm http://127.0.0.1:8000 --mlx http://127.0.0.1:8080 --interval 1
  ietop --journal ollama --docker vllm-server
  ietop --proxy 11435                     # then point clients at http://127.0.0.1:11435
  ietop --theme nord                      # any Textual theme (ctrl+p lists them)

dashboard keys: ? help, q quit, tab next panel, / filter, s sort, t timeline, e events, p pause.
  A table wider than its panel scrolls horizontally with ←/→ when a column does not fit.

{CONFIG_NOTE}
completion: ietop completion bash|zsh|tcsh prints a shell completion script.""",
    "analyze": f"""\
examples:
  ietop analyze ~/.ollama/logs/server.log
  ietop analyze server.log.1.gz server.log --since 2026-11-29T15:00 --until 2026-11-29T16:00
  ietop analyze --json vllm.log > report.json
  ietop analyze --engine proxy measurements.jsonl
  ietop analyze --csv tables/ --parquet tables/ server.log

{CONFIG_NOTE}""",
    "proxy": f"""\
examples:
  ietop proxy --upstream http://127.0.0.1:11434                   # Ollama; clients use :11435
  ietop proxy --upstream http://127.0.0.1:8000 --listen 127.0.0.1:8001 --jsonl vllm.jsonl
  ietop analyze --engine proxy vllm.jsonl                          # the report of what was measured

{CONFIG_NOTE}""",
    "replay": f"""\
examples:
  ietop replay ~/.ollama/logs/server.log
  ietop replay --speed 0 --until 2026-11-29T15:51:00 server.log    # jump to a moment, paused there
  ietop replay --paused --engine vllm vllm.log.gz                  # step with n, play with p

In the dashboard a table wider than its panel scrolls horizontally with ←/→ when a column does not fit.

{CONFIG_NOTE}""",
    "demo": f"""\
examples:
  ietop demo
  ietop demo --speed 30 --theme dracula
  ietop demo --report

In the dashboard a table wider than its panel scrolls horizontally with ←/→ when a column does not fit.

{CONFIG_NOTE}""",
    "completion": """\
examples:
  ietop completion bash > ~/.local/share/bash-completion/completions/ietop
  ietop completion zsh > ~/.zfunc/_ietop          # with fpath+=(~/.zfunc) before compinit in ~/.zshrc
  ietop completion tcsh > ~/.ietop.csh            # and `source ~/.ietop.csh` in ~/.tcshrc""",
}


class Formatter(argparse.HelpFormatter):
    """Wraps one-line texts (the descriptions) as argparse does, but keeps a text with line breaks (the
    examples) as written: RawDescriptionHelpFormatter would also leave the long descriptions unwrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def help_for(command: str | None) -> dict[str, Any]:
    """The keyword arguments that give a parser its examples: `sub.add_parser(name, **help_for(name))`."""
    return {"epilog": EPILOGS[command], "formatter_class": Formatter}
