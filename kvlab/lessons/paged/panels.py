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
from .runs import step_events, waste_timeline
from .sharing import MAX_SHARE_PREFIX, MAX_SHARE_REQUESTS, QUESTION_TOKENS, SHARE_NEW_TOKENS, SHARE_PREFIX, \
    SHARE_REQUESTS

STEP_LABEL = "步"
BLOCK_LABEL = "块大小（token）"
RESERVE_LABEL = "每个请求预留（token）"
PREFIX_LABEL = "共享的系统提示词（token）"
REQUESTS_LABEL = "请求数"
BLOCK_OPTIONS = (1, 2, 4, 8, 16, 32, 64, 128)
SHARE_BLOCK_OPTIONS = (4, 8, 16, 32)
RESERVE_STEP = 8


# -- the block-table animation ------------------------------------------------------------------------------
def render_blocks(run: ServeRun, step) -> View:
    i = inputs.whole_number(STEP_LABEL, step, 0, len(run.steps) - 1)
    return View([plots.block_table_figure(run, i)], blocks_html(run, i), run.steps[i])


def blocks_html(run: ServeRun, index: int) -> str:
    s = run.steps[index]
    events = "；".join(step_events(s)) or "没有请求在跑"
    tables = "；".join(f"请求 {rid} → {blocks}（{s.lengths[rid]} 个 token）" for rid, blocks in s.tables.items())
    free = ", ".join(map(str, s.free)) or "无"
    return (f"<b>第 {s.step} 步</b>：{html.escape(events)}。<br>"
            f"块表：{html.escape(tables) or '（空）'}<br>"
            f"空闲列表（左边的先分出去）：{free}；等待队列：{'、'.join(f'请求 {r}' for r in s.waiting) or '空'}")


def blocks_panel(run: ServeRun) -> Panel:
    """Play / step slider over the steps of ``run``."""
    play, slider = play_slider(STEP_LABEL, 0, 0, len(run.steps) - 1, interval_ms=900)
    return Panel({"step": slider}, partial(render_blocks, run), static=("step",), in_browser="step",
                 options=PanelOptions(extra=[play], layout="horizontal", css_class="kvlab-blocks"))


# -- waste of the three schemes -------------------------------------------------------------------------------
def render_waste(run: ServeRun, config, block_size, reserve) -> View:
    bs = inputs.choice(BLOCK_LABEL, block_size, list(BLOCK_OPTIONS))
    longest = config.max_seq_len
    R = inputs.whole_number(RESERVE_LABEL, reserve, RESERVE_STEP, longest)
    tl = waste_timeline(run, bs, R)
    return View([plots.waste_figure(tl)], waste_html(tl, kv_bytes_per_token(config)), tl)


def waste_html(tl, per_token: int) -> str:
    rows = "".join(
        f"<tr><td>{plots.SCHEME_NAMES[s]}</td><td>{tl.mean(s):,.0f}</td><td>{tl.peak(s):,}</td>"
        f"<td>{format_bytes(tl.peak(s) * per_token)}</td><td><b>{tl.waste_share(s):.1%}</b></td></tr>"
        for s in SCHEMES)
    cut = (f"<br>⚠ 有 {tl.cut} 个请求最长时超过每个请求预留的 {tl.reserve} 个 token：按 3.5 的固定预留，它们会被截断或拒绝"
           "（上面只按预留的长度计它们的槽位）。" if tl.cut else "")
    return ("<table><tr><th>存法</th><th>平均占用（token 槽位）</th><th>最多占用</th><th>最多占用的字节</th>"
            f"<th>空着的比例</th></tr>{rows}</table>"
            f"真正存着的 token 平均 {sum(tl.used) / len(tl.used):,.0f} 个；字节按演示模型每个 token "
            f"{format_bytes(per_token)}（K 和 V，所有层）计。{cut}")


def waste_panel(run: ServeRun, config) -> Panel:
    block = dropdown(BLOCK_LABEL, list(BLOCK_OPTIONS), run.block_size, width="200px")
    reserve = int_slider(RESERVE_LABEL, config.max_seq_len, RESERVE_STEP, config.max_seq_len, step=RESERVE_STEP,
                         width="420px")
    return Panel({"block_size": block, "reserve": reserve}, partial(render_waste, run, config),
                 static=("block_size", "reserve"), in_browser="reserve",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-waste"))


# -- shared prefixes ----------------------------------------------------------------------------------------
def sharing_lengths(prefix: int, requests: int) -> list[int]:
    """Each request's tokens at its longest: the system prompt, its question, its answer less the last token."""
    return [stored_tokens(prefix + QUESTION_TOKENS, SHARE_NEW_TOKENS)] * requests


def render_sharing(prefix, requests, block_size) -> View:
    p = inputs.whole_number(PREFIX_LABEL, prefix, 0, MAX_SHARE_PREFIX)
    R = inputs.whole_number(REQUESTS_LABEL, requests, 1, MAX_SHARE_REQUESTS)
    bs = inputs.choice(BLOCK_LABEL, block_size, list(SHARE_BLOCK_OPTIONS))
    shared = shared_prefix_blocks(p, sharing_lengths(p, R), bs)
    counts = list(range(1, MAX_SHARE_REQUESTS + 1))
    curves = [shared_prefix_blocks(p, sharing_lengths(p, n), bs) for n in counts]
    figure = plots.sharing_figure(shared, counts, [c.shared for c in curves], [c.unshared for c in curves])
    return View([figure], sharing_html(shared), shared)


def sharing_html(s) -> str:
    R, bs, p = len(s.lengths), s.block_size, s.prefix
    if s.full_shared_blocks == 0:
        why = (f"系统提示词只有 {p} 个 token，填不满一整块（{bs} 个 token）：没有可以共享的整块，每个请求各存一份。")
    elif s.copies:
        why = (f"前 {s.full_shared_blocks} 块装满了系统提示词，{R} 个请求共用（引用计数 {R}）；第 {s.full_shared_blocks + 1} 块"
               f"（块表里的位置 {s.full_shared_blocks}）只装了系统提示词的最后 {p % bs} 个 token，也先共享，"
               f"但每个后来的请求要往里写自己的第一个 token：写之前先复制一份（写时复制，共 {s.copies} 次）。")
    else:
        why = f"系统提示词恰好是 {s.full_shared_blocks} 整块，{R} 个请求共用；各自的 token 从新块开始写，不需要复制。"
    return (f"{R} 个请求，每个 {s.lengths[0]} 个 token（系统提示词 {p} + 问题 {QUESTION_TOKENS} + 回答 "
            f"{SHARE_NEW_TOKENS} − 1）：不共享 <b>{s.unshared}</b> 块，共享 <b>{s.shared}</b> 块，省下 {s.saved} 块"
            f"（{s.saved / s.unshared:.0%}）。{why}")


def sharing_panel(prefix: int = SHARE_PREFIX, requests: int = SHARE_REQUESTS, block_size: int = DEFAULT_BLOCK_SIZE) -> Panel:
    return Panel({"prefix": int_slider(PREFIX_LABEL, prefix, 0, MAX_SHARE_PREFIX, width="460px"),
                  "requests": int_slider(REQUESTS_LABEL, requests, 1, MAX_SHARE_REQUESTS, width="320px"),
                  "block_size": dropdown(BLOCK_LABEL, list(SHARE_BLOCK_OPTIONS), block_size, width="200px")},
                 render_sharing, static=("prefix", "requests", "block_size"), in_browser=("prefix", "requests"),
                 options=PanelOptions(layout="horizontal", css_class="kvlab-sharing"))


# -- static vs continuous: the measured numbers --------------------------------------------------------------
def _itl(c: BatchingComparison, policy: str) -> str:
    gaps = c.itls(policy)
    return f"{percentile(gaps, 50) * 1e3:.1f} / {percentile(gaps, 90) * 1e3:.1f}"


def batching_html(c: BatchingComparison) -> str:
    s, k = c.first("static"), c.first("continuous")
    rows = [
        ("吞吐（token/s，每一步取最快的一轮）", f"{c.tokens_per_second('static'):,.0f}", f"{c.tokens_per_second('continuous'):,.0f}"),
        ("TTFT 平均（ms）", f"{c.ttft_mean('static') * 1e3:,.0f}", f"{c.ttft_mean('continuous') * 1e3:,.0f}"),
        ("TTFT 90% 分位（ms）", f"{c.ttft_tail('static') * 1e3:,.0f}", f"{c.ttft_tail('continuous') * 1e3:,.0f}"),
        ("TTFT 平均（步）", f"{s.ttft_steps_mean:.1f}", f"{k.ttft_steps_mean:.1f}"),
        ("TPOT 平均（ms）", f"{c.tpot_mean('static') * 1e3:.1f}", f"{c.tpot_mean('continuous') * 1e3:.1f}"),
        ("ITL 中位数 / 90% 分位（ms）", _itl(c, "static"), _itl(c, "continuous")),
        ("一次解码平均几条序列", f"{s.mean_batch:.1f}", f"{k.mean_batch:.1f}"),
        ("一共几步", f"{len(s.steps)}", f"{len(k.steps)}"),
        ("最多占用的块", f"{s.peak_blocks} / {s.num_blocks}", f"{k.peak_blocks} / {k.num_blocks}"),
        ("被抢占的次数", f"{s.preemptions}", f"{k.preemptions}"),
    ]
    body = "".join(f"<tr><td>{a}</td><td>{b}</td><td>{d}</td></tr>" for a, b, d in rows)
    return (f"<table><tr><th>{html.escape(c.where)}</th><th>{plots.POLICY_NAMES['static']}</th>"
            f"<th>{plots.POLICY_NAMES['continuous']}</th></tr>{body}</table>")
