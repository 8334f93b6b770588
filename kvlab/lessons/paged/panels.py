"""Chapter 3.6's panels: render functions (control values -> View) and the factories that wire them to controls.
Every figure here comes from a run made once in the notebook; a control only re-reads or re-counts it, so each
redraw is arithmetic on at most a few hundred steps (well under 100 ms)."""
from __future__ import annotations

import html
from functools import partial

from ... import inputs
from ...memory import format_bytes, kv_bytes_per_token, stored_tokens
from ...paging import DEFAULT_BLOCK_SIZE, SCHEMES, shared_prefix_blocks
from ...serving import ServeRun
from ...stats import percentile
from ...viz import paged_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, dropdown, int_slider, play_slider
from .batching import BatchingComparison
from .phrases import PANELS, counted, ordinal
from .runs import request_names, step_events, waste_timeline
from .sharing import MAX_SHARE_PREFIX, MAX_SHARE_REQUESTS, QUESTION_TOKENS, SHARE_NEW_TOKENS, SHARE_PREFIX, \
    SHARE_REQUESTS

# The controls' labels as the Chinese edition shows them (tests match errors against them); a panel shows each in the
# course's language, label(...), asked when the panel or its error is made.
STEP_LABEL = PANELS.text("label.step", "zh")
BLOCK_LABEL = PANELS.text("label.block_size", "zh")
RESERVE_LABEL = PANELS.text("label.reserve", "zh")
PREFIX_LABEL = PANELS.text("label.prefix", "zh")
REQUESTS_LABEL = PANELS.text("label.requests", "zh")
LABEL_KEYS = {STEP_LABEL: "label.step", BLOCK_LABEL: "label.block_size", RESERVE_LABEL: "label.reserve",
              PREFIX_LABEL: "label.prefix", REQUESTS_LABEL: "label.requests"}
BLOCK_OPTIONS = (1, 2, 4, 8, 16, 32, 64, 128)
SHARE_BLOCK_OPTIONS = (4, 8, 16, 32)
RESERVE_STEP = 8


def label(constant: str) -> str:
    """A control's label (one of the ``*_LABEL`` constants) in the course's language."""
    return PANELS.say(LABEL_KEYS[constant])


# -- the block-table animation ------------------------------------------------------------------------------
def render_blocks(run: ServeRun, step) -> View:
    i = inputs.whole_number(label(STEP_LABEL), step, 0, len(run.steps) - 1)
    return View([plots.block_table_figure(run, i)], blocks_html(run, i), run.steps[i])


def blocks_html(run: ServeRun, index: int) -> str:
    s = run.steps[index]
    sep = PANELS.say("sep")
    events = sep.join(step_events(s)) or PANELS.say("nothing_running")
    tables = sep.join(counted("table", s.lengths[rid], rid=rid, blocks=blocks, tokens=s.lengths[rid])
                      for rid, blocks in s.tables.items())
    free = ", ".join(map(str, s.free)) or PANELS.say("no_free")
    return PANELS.say("step_html", step=s.step, events=html.escape(events),
                      tables=html.escape(tables) or PANELS.say("no_tables"), free=free,
                      waiting=request_names(s.waiting) or PANELS.say("no_waiting"))


def blocks_panel(run: ServeRun) -> Panel:
    """Play / step slider over the steps of ``run``."""
    play, slider = play_slider(label(STEP_LABEL), 0, 0, len(run.steps) - 1, interval_ms=900)
    return Panel({"step": slider}, partial(render_blocks, run), static=("step",), in_browser="step",
                 options=PanelOptions(extra=[play], layout="horizontal", css_class="kvlab-blocks"))


# -- waste of the three schemes -------------------------------------------------------------------------------
def render_waste(run: ServeRun, config, block_size, reserve) -> View:
    bs = inputs.choice(label(BLOCK_LABEL), block_size, list(BLOCK_OPTIONS))
    longest = config.max_seq_len
    R = inputs.whole_number(label(RESERVE_LABEL), reserve, RESERVE_STEP, longest)
    tl = waste_timeline(run, bs, R)
    return View([plots.waste_figure(tl)], waste_html(tl, kv_bytes_per_token(config)), tl)


def waste_html(tl, per_token: int) -> str:
    rows = "".join(
        f"<tr><td>{plots.SCHEME_NAMES[s]}</td><td>{tl.mean(s):,.0f}</td><td>{tl.peak(s):,}</td>"
        f"<td>{format_bytes(tl.peak(s) * per_token)}</td><td><b>{tl.waste_share(s):.1%}</b></td></tr>"
        for s in SCHEMES)
    cut = counted("waste_cut", tl.cut, cut=tl.cut, reserve=tl.reserve) if tl.cut else ""
    return PANELS.say("waste_html", rows=rows, mean=sum(tl.used) / len(tl.used), per_token=format_bytes(per_token),
                      cut=cut)


def waste_panel(run: ServeRun, config) -> Panel:
    block = dropdown(label(BLOCK_LABEL), list(BLOCK_OPTIONS), run.block_size, width="200px")
    reserve = int_slider(label(RESERVE_LABEL), config.max_seq_len, RESERVE_STEP, config.max_seq_len,
                         step=RESERVE_STEP, width="420px")
    return Panel({"block_size": block, "reserve": reserve}, partial(render_waste, run, config),
                 static=("block_size", "reserve"), in_browser="reserve",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-waste"))


# -- shared prefixes ----------------------------------------------------------------------------------------
def sharing_lengths(prefix: int, requests: int) -> list[int]:
    """Each request's tokens at its longest: the system prompt, its question, its answer less the last token."""
    return [stored_tokens(prefix + QUESTION_TOKENS, SHARE_NEW_TOKENS)] * requests


def render_sharing(prefix, requests, block_size) -> View:
    p = inputs.whole_number(label(PREFIX_LABEL), prefix, 0, MAX_SHARE_PREFIX)
    R = inputs.whole_number(label(REQUESTS_LABEL), requests, 1, MAX_SHARE_REQUESTS)
    bs = inputs.choice(label(BLOCK_LABEL), block_size, list(SHARE_BLOCK_OPTIONS))
    shared = shared_prefix_blocks(p, sharing_lengths(p, R), bs)
    counts = list(range(1, MAX_SHARE_REQUESTS + 1))
    curves = [shared_prefix_blocks(p, sharing_lengths(p, n), bs) for n in counts]
    figure = plots.sharing_figure(shared, counts, [c.shared for c in curves], [c.unshared for c in curves])
    return View([figure], sharing_html(shared), shared)


def sharing_html(s) -> str:
    R, bs, p, full = len(s.lengths), s.block_size, s.prefix, s.full_shared_blocks
    if full == 0:
        why = PANELS.say("sharing_none", prefix=p, block_size=bs)
    elif R == 1:  # nothing to share: said from the prompt's own length, whole blocks or not
        why = counted("sharing_single_whole" if p % bs == 0 else "sharing_single_part", full, full=full,
                      nth=ordinal(full + 1), rest=p % bs)
    elif s.copies:
        why = PANELS.say("sharing_copied", full=full, requests=R, nth=ordinal(full + 1), rest=p % bs,
                         copies=s.copies)
    else:
        why = PANELS.say("sharing_whole", full=full, requests=R)  # two requests or more
    return counted("sharing_html", R, requests=R, tokens=s.lengths[0], prefix=p, question=QUESTION_TOKENS,
                   answer=SHARE_NEW_TOKENS, unshared=s.unshared, shared=s.shared, saved=s.saved,
                   share=s.saved / s.unshared, why=why)


def sharing_panel(prefix: int = SHARE_PREFIX, requests: int = SHARE_REQUESTS, block_size: int = DEFAULT_BLOCK_SIZE) -> Panel:
    return Panel({"prefix": int_slider(label(PREFIX_LABEL), prefix, 0, MAX_SHARE_PREFIX, width="460px"),
                  "requests": int_slider(label(REQUESTS_LABEL), requests, 1, MAX_SHARE_REQUESTS, width="320px"),
                  "block_size": dropdown(label(BLOCK_LABEL), list(SHARE_BLOCK_OPTIONS), block_size, width="200px")},
                 render_sharing, static=("prefix", "requests", "block_size"), in_browser=("prefix", "requests"),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-sharing"))


# -- static vs continuous: the measured numbers --------------------------------------------------------------
def _itl(c: BatchingComparison, policy: str) -> str:
    gaps = c.itls(policy)
    return f"{percentile(gaps, 50) * 1e3:.1f} / {percentile(gaps, 90) * 1e3:.1f}"


def batching_html(c: BatchingComparison) -> str:
    s, k = c.first("static"), c.first("continuous")
    rows = [
        ("row.throughput", f"{c.tokens_per_second('static'):,.0f}", f"{c.tokens_per_second('continuous'):,.0f}"),
        ("row.ttft_mean", f"{c.ttft_mean('static') * 1e3:,.0f}", f"{c.ttft_mean('continuous') * 1e3:,.0f}"),
        ("row.ttft_tail", f"{c.ttft_tail('static') * 1e3:,.0f}", f"{c.ttft_tail('continuous') * 1e3:,.0f}"),
        ("row.ttft_steps", f"{s.ttft_steps_mean:.1f}", f"{k.ttft_steps_mean:.1f}"),
        ("row.tpot", f"{c.tpot_mean('static') * 1e3:.1f}", f"{c.tpot_mean('continuous') * 1e3:.1f}"),
        ("row.itl", _itl(c, "static"), _itl(c, "continuous")),
        ("row.batch", f"{s.mean_batch:.1f}", f"{k.mean_batch:.1f}"),
        ("row.steps", f"{len(s.steps)}", f"{len(k.steps)}"),
        ("row.peak_blocks", f"{s.peak_blocks} / {s.num_blocks}", f"{k.peak_blocks} / {k.num_blocks}"),
        ("row.preemptions", f"{s.preemptions}", f"{k.preemptions}"),
    ]
    body = "".join(f"<tr><td>{PANELS.say(a)}</td><td>{b}</td><td>{d}</td></tr>" for a, b, d in rows)
    return (f"<table><tr><th>{html.escape(c.where)}</th><th>{plots.POLICY_NAMES['static']}</th>"
            f"<th>{plots.POLICY_NAMES['continuous']}</th></tr>{body}</table>")
