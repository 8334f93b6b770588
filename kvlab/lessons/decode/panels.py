"""Chapter 3.1's panels: the walkthrough (play / step slider, layer and head menus; top-k bars, the two
attention pictures and the cache's K/V rows of one step) and the latency panel (length and repeats, measured on a
click, refused before it runs when its uncached work passes :data:`LATENCY_MAX_WORK`). Each control's label is one
constant, used by the control and by its check; the panels show it, and every readout, in the course's language
(:data:`.phrases.PANELS`), looked up when the panel or its error is made."""
from __future__ import annotations

import html
from functools import partial, reduce

from ..._validate import positive_int
from ...measure import device_label
from ...model import ToyTransformer
from ...inputs import InputError, whole_number
from ...viz import decode_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, dropdown, int_slider, play_slider, run_button
from .phrases import PANELS
from .timings import measure_decode_latency
from .walkthrough import DecodeStep, most_attended


# The controls' labels as the Chinese edition shows them (tests match errors against them); a panel shows each in the
# course's language, label(...), asked when the panel or its error is made.
STEP_LABEL, LAYER_LABEL, HEAD_LABEL = (PANELS.text(key, "zh") for key in ("label.step", "label.layer", "label.head"))
NEW_TOKENS_LABEL, REPEATS_LABEL = PANELS.text("label.new_tokens", "zh"), PANELS.text("label.repeats", "zh")
LABEL_KEYS = {STEP_LABEL: "label.step", LAYER_LABEL: "label.layer", HEAD_LABEL: "label.head",
              NEW_TOKENS_LABEL: "label.new_tokens", REPEATS_LABEL: "label.repeats"}


def label(constant: str) -> str:
    """A control's label (one of the ``*_LABEL`` constants) in the course's language."""
    return PANELS.say(LABEL_KEYS[constant])


def shown_tokens(tokens: list[str]) -> str:
    """A step's input tokens in one line, separated as the course's language separates them."""
    return reduce(lambda left, right: PANELS.say("token_pair", left=left, right=right), tokens)


def render_step(steps: list[DecodeStep], step, layer, head) -> View:
    """The walkthrough panel: top-k bars, the two attention pictures, and the cache's K/V rows of one step."""
    s = steps[whole_number(label(STEP_LABEL), step, 1, len(steps)) - 1]
    layer = whole_number(label(LAYER_LABEL), layer, 0, s.full_weights.shape[0] - 1)
    head = whole_number(label(HEAD_LABEL), head, 0, s.full_weights.shape[1] - 1)
    n_rep = s.full_weights.shape[1] // s.k_cache.shape[1]  # query heads per KV head
    group = head // n_rep
    figures = [
        plots.topk_figure(s.topk, "".join(s.tokens)),
        plots.attention_compare_figure(s.full_weights[layer, head].numpy(), s.cached_weights[layer, head].numpy(),
                                       s.tokens, layer, head, s.kv_without_cache, s.kv_with_cache),
        plots.cache_rows_figure(s.k_cache[layer, group].numpy(), s.v_cache[layer, group].numpy(), s.tokens, layer,
                                group, s.kv_with_cache),
    ]
    n = s.kv_with_cache
    diff = (s.cached_weights[layer, head, -1] - s.full_weights[layer, head, -1]).abs().max().item()
    mates = [h for h in range(group * n_rep, (group + 1) * n_rep) if h != head]
    looks = PANELS.say("look_sep").join(
        PANELS.say("look", head=h, position=i + 1, token=html.escape(tok), weight=w)
        for h in [head, *mates] for i, tok, w in [most_attended(s, layer, h)])
    if n == s.t:
        work = PANELS.say("work_prefill", n=n)
    else:
        work = PANELS.say("work_decode", kv_none=s.kv_without_cache, t=s.t, scores_none=s.t * s.t, n=n,
                          scores_kv=n * s.t, rest=s.t - n)
    readout = PANELS.say("step_readout", step=s.step, t=s.t, tokens=html.escape(shown_tokens(s.tokens)),
                         token=html.escape(s.next_token), p=s.topk[0][1], work=work, layer=layer, head=head,
                         diff=diff, group=group, first=group * n_rep, last=(group + 1) * n_rep - 1, looks=looks)
    return View(figures, readout, s)


def walkthrough_panel(model: ToyTransformer, steps: list[DecodeStep]) -> Panel:
    """Play / step slider, layer and head menus wired to :func:`render_step`."""
    cfg = model.config
    play, step_slider = play_slider(label(STEP_LABEL), 1, 1, len(steps))
    heads = [(PANELS.say("head_option", head=h, group=h // cfg.n_rep), h) for h in range(cfg.n_head)]
    return Panel({"step": step_slider,
                  "layer": dropdown(label(LAYER_LABEL), list(range(cfg.n_layer)), 0, width="120px"),
                  "head": dropdown(label(HEAD_LABEL), heads, 0, width="200px")},
                 partial(render_step, steps), static=("step",), in_browser="step",
                 options=PanelOptions(extra=[play], layout="horizontal", css_class="kvlab-walkthrough"))


LATENCY_MAX_WORK = 300_000  # token positions one click may feed the model without a cache (about 50 s on 2 cores)


def latency_work(new_tokens: int, repeats: int, prompt_len: int = 4) -> int:
    """Token positions the uncached runs of one click feed the model (a warm-up and ``repeats`` runs): without a
    cache, the pass that makes token t re-reads all t tokens, so one run costs the sum of t over its passes. The
    cached runs feed one token a pass and are left out (at most a few per cent as much)."""
    per_run = sum(range(prompt_len, prompt_len + positive_int("new_tokens", new_tokens)))
    return (positive_int("repeats", repeats) + 1) * per_run


def render_latency(model: ToyTransformer, new_tokens, repeats, progress: bool = True) -> View:
    """The latency panel: measure both ways, plot per-step and cumulative time with fitted exponents. The work is
    counted first: a setting past LATENCY_MAX_WORK is refused with the count (in the course's language) before
    anything runs, instead of blocking the kernel for minutes; the measurement itself stays interruptible (the stop
    button)."""
    new_tokens = whole_number(label(NEW_TOKENS_LABEL), new_tokens, 1, model.config.max_seq_len - 8)
    repeats = whole_number(label(REPEATS_LABEL), repeats, 1, 9)
    work = latency_work(new_tokens, repeats)
    if work > LATENCY_MAX_WORK:
        raise InputError(label(NEW_TOKENS_LABEL), PANELS.say(
            "too_much_work", repeats_label=label(REPEATS_LABEL), work=work, repeats=repeats, limit=LATENCY_MAX_WORK,
            times=work / LATENCY_MAX_WORK))
    results = measure_decode_latency(model, new_tokens, repeats, progress=progress)
    none, kv = results["none"], results["kv"]
    total_none, total_kv = none.cumulative_seconds[-1], kv.cumulative_seconds[-1]
    readout = PANELS.say("latency_readout", n=new_tokens, none=total_none, kv=total_kv, ratio=total_none / total_kv,
                         none_step=none.step_exponent, kv_step=kv.step_exponent, none_total=none.cumulative_exponent,
                         kv_total=kv.cumulative_exponent, device=device_label(model.device))
    return View([plots.latency_figure(results)], readout, results)


def latency_panel(model: ToyTransformer, new_tokens: int = 192) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked. The first one runs while the cell
    does, without a progress bar (it would stay in the saved output at 0 %); a click's shows one."""
    rendered = []

    def render(new_tokens, repeats) -> View:
        view = render_latency(model, new_tokens, repeats, progress=bool(rendered))
        rendered.append(True)
        return view

    return Panel({"new_tokens": int_slider(label(NEW_TOKENS_LABEL), new_tokens, 32, model.config.max_seq_len - 8,
                                           step=32),
                  "repeats": int_slider(label(REPEATS_LABEL), 1, 1, 5, width="300px")},
                 render, options=PanelOptions(layout="horizontal", css_class="kvlab-latency", button=run_button()))
