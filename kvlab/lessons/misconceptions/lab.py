"""Chapter 3.5's find-the-bug lab: deliberately broken caches (kvlab.teaching_caches) against the correct one,
token by token and logit by logit, with each bug revealed on request."""
from __future__ import annotations

import html
from dataclasses import dataclass
from functools import lru_cache, partial

import torch

from ... import inputs
from ..._validate import positive_int
from ...cache import KVCache
from ...generation import generate
from ...language import get_language
from ...model import ToyTransformer
from ...teaching_caches import BROKEN_CACHES
from ...tokenizer import TOKENIZERS
from ...viz import misconceptions_plots as plots
from ...viz.source import snippet_html, source_snippet
from ...viz.widgets import Panel, PanelOptions, View, checkbox, dropdown, int_slider, text_box
from .common import NEW_TOKENS_LABEL, leave_a_core
from .phrases import PANELS, PROMPTS, label


LAB_PROMPT = PROMPTS.text("lab", "zh")  # the lab's default: each broken cache first changes a token at a different step
PREVIOUS_PROMPT = PROMPTS.text("previous", "zh")  # the request served before the lab's prompt, with the same cache
LAB_NEW_TOKENS = 24
LOGIT_TOLERANCE = 1e-4  # |logit difference| below this is float rounding (a correct cache stays under 1e-5)
REFERENCE = "kv"  # the correct cache, as a control


def lab_prompts(tokenizer) -> tuple[str, str]:
    """The lab's prompt and the request served before it, in the language of the demo model ``tokenizer`` belongs to
    (PROMPTS' "lab" and "previous"; Chinese for any other tokenizer)."""
    lang = next((lang for lang, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), "zh")
    return PROMPTS.text("lab", lang), PROMPTS.text("previous", lang)


@dataclass(frozen=True)
class BugCard:
    """What the lab shows for one cache: a neutral label, and, revealed on request, the explanation, the fix and
    the methods the cache overrides (shown from their source). The words are PANELS' ``card.<key>.*``, read in the
    course's language when asked for."""

    key: str
    methods: tuple[str, ...]

    def _say(self, part: str) -> str:
        return PANELS.say(f"card.{self.key}.{part}", previous=PROMPTS.say("previous"), reuse=label(REUSE_LABEL))

    @property
    def label(self) -> str:
        return self._say("label")

    @property
    def explanation(self) -> str:
        return self._say("explanation")

    @property
    def fix(self) -> str:
        return self._say("fix")


CACHE_LABEL, PROMPT_LABEL, REVEAL_LABEL, REUSE_LABEL = "缓存", "提示词", "显示解释", "先服务上一个请求"
BUG_CARDS: dict[str, BugCard] = {key: BugCard(key, methods) for key, methods in (
    (REFERENCE, ("_store", "_read")), ("rope_offset", ("_store",)), ("no_reset", ("reset",)),
    ("k_as_v", ("_store",)), ("off_by_one", ("_store",)), ("one_slot", ("_store", "_read")))}
LAB_CACHES = (REFERENCE, *BROKEN_CACHES)


@dataclass(frozen=True)
class BugRun:
    """One cache against the uncached reference. The reference is teacher-forced: at every step it reads the
    same text this cache has written so far, so each step compares the next token of one and the same input."""

    cache: str  # "kv", a key of BROKEN_CACHES, or the name of the KVCache subclass that was run
    prompt: str
    reference: list[str]  # per step: the uncached model's next token after this cache's text so far
    output: list[str]  # ... this cache's token
    logit_diff: list[float]  # per step: max |logit difference| against the reference
    reused: bool = True  # the cache served PREVIOUS_PROMPT first (reset() in between)
    free_running: tuple = ()  # the uncached model's own text for the prompt (what a correct cache writes)
    previous: str = PREVIOUS_PROMPT  # the request served first when ``reused``

    @property
    def first_token_step(self) -> int | None:
        """1-based step of the first new token that differs (None: all the same)."""
        return next((i + 1 for i, (a, b) in enumerate(zip(self.reference, self.output)) if a != b), None)

    @property
    def first_logit_step(self) -> int | None:
        """1-based step of the first distribution that differs beyond float rounding."""
        return next((i + 1 for i, d in enumerate(self.logit_diff) if d > LOGIT_TOLERANCE), None)

    @property
    def differing_steps(self) -> int:
        return sum(a != b for a, b in zip(self.reference, self.output))


def cache_class(cache) -> type[KVCache]:
    """The ``KVCache`` class a lab cache id (or a ``KVCache`` subclass, a learner's fix) stands for."""
    if isinstance(cache, type) and issubclass(cache, KVCache):
        return cache
    if cache == REFERENCE:
        return KVCache
    if cache in BROKEN_CACHES:
        return BROKEN_CACHES[cache]
    raise ValueError(f"cache must be one of {', '.join(LAB_CACHES)} or a KVCache subclass; got {cache!r}")


def make_lab_cache(cache, model: ToyTransformer, max_seq_len: int) -> KVCache:
    """A fresh cache for the lab: the correct ``KVCache`` ("kv"), one of ``BROKEN_CACHES`` by its id, or any
    ``KVCache`` subclass (a learner's fixed version of a broken one)."""
    return cache_class(cache)(model.config, 1, max_seq_len, dtype=model.dtype, device=model.device)


@leave_a_core
@torch.no_grad()
def run_lab_cache(model: ToyTransformer, tokenizer, cache, prompt: str | None = None,
                  new_tokens: int = LAB_NEW_TOKENS, previous: str | None = None, reused: bool = True) -> BugRun:
    """Serve ``prompt`` with one cache (when ``reused``: after serving ``previous`` with it and ``reset()``, as a
    server would) and compare every step with the uncached model reading the same text. ``cache``: an id (see
    :func:`make_lab_cache`) or a ``KVCache`` subclass. ``prompt``/``previous`` default to :func:`lab_prompts`: the
    model's language's (LAB_PROMPT and PREVIOUS_PROMPT on the Chinese model)."""
    default_prompt, default_previous = lab_prompts(tokenizer)
    prompt = default_prompt if prompt is None else prompt
    previous = default_previous if previous is None else previous
    new_tokens = positive_int("new_tokens", new_tokens)
    first, second = tokenizer.encode(previous), tokenizer.encode(prompt)
    kv = make_lab_cache(cache, model, len(first) + len(second) + 2 * (new_tokens - 1))
    if reused:
        generate(model, [first], new_tokens, cache=kv)
        kv.reset()
    out = generate(model, [second], new_tokens, cache=kv, return_logits=True)
    read = out.tokens[:, :-1]  # [1, P + n - 1]: the prompt and every new token but the last (never fed back)
    ref_logits = model(read)[:, len(second) - 1:]  # [1, n, vocab]: one full pass, no cache, causal mask
    diff = (out.logits - ref_logits).abs().nan_to_num(float("inf")).amax(dim=-1)[0]  # [n]
    as_text = lambda ids: [tokenizer.decode([int(i)]) for i in ids]  # noqa: E731
    name = cache.__name__ if isinstance(cache, type) else cache
    own = generate(model, [second], new_tokens, cache="kv").new_tokens[0]  # = uncached tokens (tests prove it)
    return BugRun(name, prompt, as_text(ref_logits[0].argmax(dim=-1)), as_text(out.new_tokens[0]), diff.tolist(),
                  bool(reused), tuple(as_text(own)), previous)


def lab_line(run: BugRun) -> str:
    """One line per cache for a printed overview: where its tokens and its logits first part from the reference."""
    name = BUG_CARDS[run.cache].label if run.cache in BUG_CARDS else run.cache
    if run.first_token_step is None and run.first_logit_step is None:
        return PANELS.say("lab.line_same", label=name, steps=len(run.output))
    tokens = (PANELS.say("lab.tokens_same") if run.first_token_step is None
              else PANELS.say("lab.tokens_from", step=run.first_token_step))
    return PANELS.say("lab.line", label=name, tokens=tokens, logit=run.first_logit_step)


MAX_LAB_PROMPT, MAX_LAB_TOKENS = 64, 48


def render_lab(model: ToyTransformer, tokenizer, cache, prompt, new_tokens, reused, reveal,
               run=run_lab_cache) -> View:
    """The lab panel: the reference and this cache's tokens with the differences marked, the logit
    differences per step, and (when ``reveal``) what the bug is and the code it is in."""
    cache = inputs.choice(label(CACHE_LABEL), cache, list(LAB_CACHES))
    prompt, _ = inputs.prompt_tokens(label(PROMPT_LABEL), prompt, tokenizer, MAX_LAB_PROMPT)
    n = inputs.whole_number(label(NEW_TOKENS_LABEL), new_tokens, 1, MAX_LAB_TOKENS)
    reused, reveal = inputs.yes_no(label(REUSE_LABEL), reused), inputs.yes_no(label(REVEAL_LABEL), reveal)
    result = run(model, tokenizer, cache, prompt, n, reused=reused)
    figure = plots.divergence_figure(result, BUG_CARDS[cache].label, LOGIT_TOLERANCE)
    return View([figure], lab_html(result, reveal), result)


def _shown(token: str) -> str:
    """A token as one visible cell: a newline as ↵, a space as ␣."""
    return html.escape(token.replace("\n", "↵").replace(" ", "␣"))


def tokens_table_html(run: BugRun, name: str) -> str:
    """The prompt and the new tokens, one column per step, the reference above this cache; the first step that
    differs in a strong colour, later differing steps in a light one."""
    first = run.first_token_step
    cell = "padding:1px 3px;text-align:center;min-width:1.2em"

    def row(row_name: str, tokens: list[str], strong: str) -> str:
        tds = []
        for i, (tok, ref) in enumerate(zip(tokens, run.reference)):
            bg = strong if first == i + 1 else ("#fbe3d6" if first and i + 1 > first and tok != ref else "")
            style = f"{cell};background:{bg};color:white" if bg == strong else f"{cell};background:{bg}"
            tds.append(f'<td style="{style}">{_shown(tok)}</td>')
        return (f'<tr><td style="padding-right:8px;white-space:nowrap">{html.escape(row_name)}</td>'
                f'<td style="color:#888;padding-right:6px;white-space:nowrap">{html.escape(run.prompt)}</td>'
                + "".join(tds) + "</tr>")

    steps = "".join(f'<td style="{cell};color:#999;font-size:75%">{i}</td>' for i in range(1, len(run.output) + 1))
    return ('<table style="border-collapse:collapse;margin:4px 0">'
            f'<tr><td style="color:#999;font-size:75%">{PANELS.say("lab.step_header")}</td>'
            f'<td style="color:#999;font-size:75%">{PANELS.say("lab.prompt_header")}</td>'
            f"{steps}</tr>{row(PANELS.say('lab.reference_row'), run.reference, '#0072B2')}"
            f"{row(name, run.output, '#D55E00')}</table>")


def methods_html(cache: str) -> str:
    """The source of the methods the cache overrides, as they are in the installed package."""
    cls = cache_class(cache)
    return "".join(snippet_html(source_snippet(getattr(cls, m))) for m in BUG_CARDS[cache].methods)


def teacher_forcing_html(run: BugRun) -> str:
    """Why the reference row need not read well, and the text a correct cache writes for the same prompt."""
    own = "".join(_shown(t) for t in run.free_running)
    return f'<span style="color:#555">{PANELS.say("lab.teacher_forcing", own=own)}</span>'


def lab_html(run: BugRun, reveal: bool) -> str:
    card = BUG_CARDS[run.cache]
    step, logit_step = run.first_token_step, run.first_logit_step
    say = PANELS.say
    served = (say("lab.served_reused", previous=html.escape(run.previous)) if run.reused else say("lab.served_fresh"))
    lines = [say("lab.intro", prompt=html.escape(run.prompt), served=served), tokens_table_html(run, card.label),
             teacher_forcing_html(run)]
    if step is None:
        lines.append(say("lab.all_same", label=html.escape(card.label), steps=len(run.output), diff=max(run.logit_diff)))
        if run.cache != REFERENCE:
            lines.append(say("lab.hidden", reuse=label(REUSE_LABEL)))
    else:
        lines.append(say("lab.differs", label=html.escape(card.label), step=step,
                         reference=_shown(run.reference[step - 1]), output=_shown(run.output[step - 1]),
                         logit=logit_step, steps=len(run.output), differing=run.differing_steps))
    if reveal:
        lines.append(say("lab.reveal", explanation=html.escape(card.explanation), fix=html.escape(card.fix),
                         methods=methods_html(run.cache)))
    else:
        lines.append(say("lab.guess", reveal=label(REVEAL_LABEL)))
    return "<br>".join(lines)


def lab_panel(model: ToyTransformer, tokenizer, cache: str = "rope_offset", prompt: str | None = None,
              new_tokens: int = LAB_NEW_TOKENS, reused: bool = True) -> Panel:
    """Cache menu, prompt box (by default :func:`lab_prompts`' prompt), length slider, a fresh-or-reused box and a
    reveal box (cleared whenever another cache is chosen)."""
    prompt = lab_prompts(tokenizer)[0] if prompt is None else prompt
    menu = dropdown(label(CACHE_LABEL), [(BUG_CARDS[c].label, c) for c in LAB_CACHES], cache, width="280px")
    wide = get_language() != "zh"  # the English labels are longer
    reveal = checkbox(label(REVEAL_LABEL), False, width="190px" if wide else "120px")
    menu.observe(lambda _change: setattr(reveal, "value", False), names="value")
    text = text_box(label(PROMPT_LABEL), prompt, width="260px")
    reuse = checkbox(label(REUSE_LABEL), reused, width="250px" if wide else "170px")
    run = lru_cache(maxsize=64)(run_lab_cache)  # the same settings twice (reveal toggled) run once
    controls = {"cache": menu, "prompt": text,
                "new_tokens": int_slider(label(NEW_TOKENS_LABEL), new_tokens, 1, MAX_LAB_TOKENS, width="340px"),
                "reused": reuse, "reveal": reveal}
    return Panel(controls, partial(render_lab, model, tokenizer, run=run), in_browser="new_tokens",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-lab"))


def run_all_lab_caches(model: ToyTransformer, tokenizer, prompt: str | None = None,
                       new_tokens: int = LAB_NEW_TOKENS, reused: bool = True) -> dict[str, BugRun]:
    return {c: run_lab_cache(model, tokenizer, c, prompt, new_tokens, reused=reused) for c in LAB_CACHES}
