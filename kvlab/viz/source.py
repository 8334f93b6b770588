"""Show a function's or method's real source at run time, syntax-highlighted, with its file and line numbers.

A notebook that says "these lines do it" shows them from the installed package, never a pasted
copy that could drift. Pick a part of a function by markers (the first line containing ``start``
through the first later line containing ``stop``), which survive edits elsewhere in the file,
or by ``lines`` counted from the function's first line.
"""
from __future__ import annotations

import html
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

from .phrases import SOURCE


@dataclass(frozen=True)
class SourceSnippet:
    """Lines of a function's source, as they are in the file now."""

    qualname: str
    path: str  # relative to the package's parent folder when possible ("kvlab/model.py")
    first_line: int  # line number in the file of ``text``'s first line
    text: str  # dedented

    @property
    def last_line(self) -> int:
        return self.first_line + self.text.count("\n")


def _display_path(filename: str) -> str:
    path = Path(filename).resolve()
    root = Path(__file__).resolve().parents[2]  # the folder holding the kvlab package
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def _find(lines: list[str], marker: str, begin: int, what: str, qualname: str) -> int:
    for i in range(begin, len(lines)):
        if marker in lines[i]:
            return i
    raise ValueError(f"{what}: no line of {qualname} from line {begin + 1} on contains {marker!r}")


def source_snippet(obj, start: str | None = None, stop: str | None = None,
                   lines: tuple[int, int] | None = None) -> SourceSnippet:
    """The source of ``obj`` (a function, method or class), or the part of it chosen by markers or ``lines``.

    ``start``/``stop``: substrings of the first and last line to show (each the first match, ``stop``
    searched from ``start`` on). ``lines``: ``(first, last)``, 1-based and inclusive, counted from the
    ``def`` line. Raises ``ValueError`` naming the argument when a marker or range does not fit.
    """
    target = inspect.unwrap(getattr(obj, "__func__", obj))
    try:
        src_lines, first = inspect.getsourcelines(target)
        filename = inspect.getsourcefile(target)
    except (TypeError, OSError) as exc:
        raise ValueError(f"obj: no Python source for {obj!r} ({exc})") from None
    qualname = getattr(target, "__qualname__", repr(target))
    if lines is not None and (start is not None or stop is not None):
        raise ValueError("lines: give either lines or start/stop markers, not both")
    lo, hi = 0, len(src_lines) - 1
    if lines is not None:
        if (not isinstance(lines, tuple) or len(lines) != 2 or not all(isinstance(n, int) for n in lines)
                or not 1 <= lines[0] <= lines[1] <= len(src_lines)):
            raise ValueError(f"lines: need (first, last) with 1 <= first <= last <= {len(src_lines)}, got {lines!r}")
        lo, hi = lines[0] - 1, lines[1] - 1
    if start is not None:
        lo = _find(src_lines, start, 0, "start", qualname)
    if stop is not None:
        hi = _find(src_lines, stop, lo, "stop", qualname)
    text = textwrap.dedent("".join(src_lines[lo:hi + 1])).rstrip("\n")
    return SourceSnippet(qualname, _display_path(filename), first + lo, text)


def snippet_html(snippet: SourceSnippet, caption: str | None = None) -> str:
    """Highlighted HTML (inline styles: renders the same in JupyterLab, Colab and a saved notebook)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    formatter = HtmlFormatter(noclasses=True, linenos="inline", linenostart=snippet.first_line, style="friendly",
                              nobackground=True)
    code = highlight(snippet.text, PythonLexer(), formatter)
    where = (SOURCE.say("where", path=html.escape(snippet.path), first=snippet.first_line, last=snippet.last_line)
             + f"<code>{html.escape(snippet.qualname)}</code>")
    head = SOURCE.say("caption", caption=html.escape(caption)) if caption else ""
    return (f'<div class="kvlab-source" style="border:1px solid #ddd;border-radius:4px;margin:6px 0;'
            f'background:#f8f8f8"><div style="font-size:90%;color:#555;padding:4px 10px;'
            f'border-bottom:1px solid #ddd">{head}{where}</div>'
            f'<div style="padding:0 10px;font-size:90%;overflow-x:auto">{code}</div></div>')


def show_source(obj, start: str | None = None, stop: str | None = None, lines: tuple[int, int] | None = None,
                caption: str | None = None):
    """An ``IPython.display.HTML`` of :func:`source_snippet` (put it last in a cell, or ``display`` it)."""
    from IPython.display import HTML

    return HTML(snippet_html(source_snippet(obj, start, stop, lines), caption))
