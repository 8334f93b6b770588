"""Shared by the command lines (``python -m kvlab.bench``, ``python -m kvlab.train``): an API error becomes
argparse's usage error (exit code 2, no traceback) that names the option as the learner typed it."""
from __future__ import annotations

import argparse
import re
from typing import NoReturn


def in_option_words(parser: argparse.ArgumentParser, message: str) -> str:
    """``"new_tokens: prompt_len + new_tokens ..."`` -> ``"--new-tokens: --prompt-len + --new-tokens ..."``: the
    argument name an API error starts with, and every snake_case name of an option in it, as the option is typed."""
    flags = {a.dest: a.option_strings[-1] for a in parser._actions if a.option_strings}
    m = re.match(r"[a-z][a-z0-9_]*", message)
    if m and m.group(0) in flags:
        message = flags[m.group(0)] + message[m.end():]
    snake = "|".join(re.escape(d) for d in sorted(flags, key=len, reverse=True) if "_" in d)
    return re.sub(rf"(?<![\w-])({snake})\b", lambda m: flags[m.group(1)], message) if snake else message


def usage_error(parser: argparse.ArgumentParser, error: Exception | str) -> NoReturn:
    parser.error(in_option_words(parser, str(error)))
