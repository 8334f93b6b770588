"""Shared by the command lines (``python -m kvlab.bench``, ``python -m kvlab.train``): an API error becomes
argparse's usage error (exit code 2, no traceback) that names the option as the learner typed it."""
from __future__ import annotations

import argparse
import re
from typing import NoReturn


def in_option_words(parser: argparse.ArgumentParser, message: str) -> str:
    """``"new_tokens: must be ..."`` -> ``"--new-tokens: must be ..."`` when the parser has that option."""
    m = re.match(r"[a-z][a-z0-9_]*", message)
    if m is None:
        return message
    flags = {a.dest: a.option_strings[-1] for a in parser._actions if a.option_strings}
    flag = flags.get(m.group(0))
    return flag + message[m.end():] if flag else message


def usage_error(parser: argparse.ArgumentParser, error: Exception | str) -> NoReturn:
    parser.error(in_option_words(parser, str(error)))
