"""Plot builders of chapter 3.5 (misconceptions, the find-the-bug lab): pure functions, results in, figures out."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..memory import format_bytes, iec_unit
from .style import MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, new_figure

if TYPE_CHECKING:  # the lesson's result types (the lesson imports this module)
    from ..lessons.misconceptions import BugRun, CacheRun, ReservationPlan
    from ..measure import DecodeTiming

GIB = 2**30
WEIGHT_COLOR, USED_COLOR, UNUSED_COLOR, FREE_COLOR, OVER_COLOR = PALETTE[0], PALETTE[1], "#f3d9a4", "#d9d9d9", "#D55E00"
SAME_COLOR, DIFF_COLOR = PALETTE[2], PALETTE[3]


# -- misconception 1 ---------------------------------------------------------------------------------
def weights_vs_cache_figure(run: "CacheRun", x_max: int) -> go.Figure:
    """Bytes against the tokens in the cache (B x S): the weights a flat line, the cache's written bytes growing
    pass by pass along the line of its bytes per token up to the preallocated size (a dotted line, allocated
    before the prefill). Axes are fixed by ``x_max`` so moving a control moves the points."""
    B = run.batch_size
    unit, size = iec_unit(max(run.after.n_bytes, x_max * run.per_token_bytes))
    tokens = [0] + [B * s for s in run.seq_lens]  # before the prefill, then after each pass (B x S)
    cache = [0] + list(run.cache_bytes)
    fig = new_figure(f"权重不变，缓存随 B × S 增长（B = {B}，S = {run.stored_tokens}：已写入 "
                     f"{format_bytes(run.final_bytes)}，权重 {format_bytes(run.after.n_bytes)}）", height=400, width=WIDE)
    fig.add_scatter(x=[0, x_max], y=[0, x_max * run.per_token_bytes / size], mode="lines", name=(
        f"每个 token {format_bytes(run.per_token_bytes)}：B × S × {format_bytes(run.per_token_bytes)}"),
        line=dict(color="#bbb", dash="dot"), hoverinfo="skip")
    fig.add_scatter(x=[0, x_max], y=[run.before.n_bytes / size, run.after.n_bytes / size], mode="lines",
                    name=f"权重（参数）：校验和 {run.before.checksum[:8]} → {run.after.checksum[:8]}",
                    line=dict(color=WEIGHT_COLOR, width=3))
    hover = "B × S = %{x:,} 个 token：%{y:.3g} " + unit + "<extra></extra>"
    fig.add_scatter(x=[0, tokens[-1]], y=[run.allocated_bytes / size] * 2, mode="lines",
                    name=f"KV Cache 已分配：{format_bytes(run.allocated_bytes)}（预分配，预填充之前就这么大）",
                    line=dict(color=USED_COLOR, width=2, dash="dot"),
                    hovertemplate=f"已分配 {format_bytes(run.allocated_bytes)}<extra></extra>")
    fig.add_scatter(x=tokens[:2], y=[b / size for b in cache[:2]], mode="lines+markers",
                    name="KV Cache 已写入，预填充：一次写入整段提示词", line=dict(color=USED_COLOR, width=2, dash="dash"),
                    marker=dict(size=7), hovertemplate=hover)
    fig.add_scatter(x=tokens[1:], y=[b / size for b in cache[1:]], mode="lines+markers",
                    name="KV Cache 已写入，解码：每步每条序列多 1 个 token", line=dict(color=USED_COLOR, width=3),
                    marker=dict(size=5), hovertemplate=hover)
    fig.update_xaxes(title=axis_title("缓存里的 token 总数 B × S", "tokens"), range=[0, x_max * 1.02])
    top = max(run.after.n_bytes, x_max * run.per_token_bytes) / size
    fig.update_yaxes(title=axis_title("字节", unit), range=[0, top * 1.08])
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.3), margin=dict(b=130), height=440)
    return fig


# -- misconception 2 ---------------------------------------------------------------------------------
def k_only_figure(timings: dict[str, "DecodeTiming"]) -> go.Figure:
    """Left: measured time of each decode step. Middle and right: tokens whose K and whose V each step projected
    (from the trace), on log axes so the lines at 1 stay visible beside those at t. Lines that coincide are drawn
    wide under thin so both stay visible; a note with an arrow names each coincidence."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, column_widths=[0.44, 0.28, 0.28],
                        subplot_titles=("每一步的耗时（本机实测）", "每步投影 K 的 token 数", "每步投影 V 的 token 数"))
    width = {"k_only": 9, "none": 2.5, "kv": 2.5}  # K-only lies under "kv" (K) and under "none" (V)
    order = sorted(timings, key=lambda m: m != "k_only")  # the wide line first, underneath
    rank = {m: i for i, m in enumerate(timings)}  # ... but the legend in the caller's order
    for mode in order:
        t = timings[mode]
        color, label = MODE_COLORS.get(mode, PALETTE[-1]), MODE_LABELS.get(mode, mode)
        x = t.seq_len[1:]  # decode passes
        fig.add_scatter(x=x, y=[s * 1e3 for s in t.step_seconds[1:]], mode="lines", name=label, legendgroup=mode,
                        legendrank=rank[mode], line=dict(color=color, width=1.6), row=1, col=1)
        for col, counts in ((2, t.k_tokens[1:]), (3, t.v_tokens[1:])):
            fig.add_scatter(x=x, y=counts, mode="lines", name=label, legendgroup=mode, showlegend=False,
                            line=dict(color=color, width=width.get(mode, 2.5)), opacity=0.45 if mode == "k_only" else 1,
                            row=1, col=col)
    lengths = timings["none"].seq_len[1:]
    mid = lengths[len(lengths) // 2]
    top = math.log10(max(lengths) * 2)
    # log axes: annotation coordinates are log10 of the value; each note sits beside its line, never on it
    fig.add_annotation(text="只缓存 K 与有缓存重合：1", x=mid, y=0, xref="x2", yref="y2", ax=0, ay=-40,
                       showarrow=True, arrowhead=2, arrowcolor="#777", font=dict(color="#555"),
                       bgcolor="rgba(255,255,255,0.85)")
    fig.add_annotation(text="只缓存 K 与无缓存重合：t", x=mid, y=math.log10(mid), xref="x3", yref="y3", ax=10,
                       ay=55, showarrow=True, arrowhead=2, arrowcolor="#777", font=dict(color="#555"),
                       bgcolor="rgba(255,255,255,0.85)")
    fig.update_xaxes(title=axis_title("序列长度 t", "tokens"))
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), rangemode="tozero", row=1, col=1)
    for col in (2, 3):  # (the subplot titles name the quantity)
        fig.update_yaxes(type="log", range=[-0.3, top], dtick=1, title=axis_title("token 数", "对数刻度"), row=1,
                         col=col)
    return apply_template(fig, "无缓存、只缓存 K、缓存 K 和 V：同样的 token，不同的代价（数字来自 trace）", 420,
                          legend_below=True)


# -- misconception 3 ---------------------------------------------------------------------------------
def _segments(fig: go.Figure, row: str, spans: list[tuple[float, float]], name: str, color, hover: list[str],
              pattern: str = "", show: bool = True) -> None:
    """One trace of horizontal bar segments [start, end) (bytes) on ``row``, drawn in GiB from explicit bases."""
    fig.add_bar(y=[row] * len(spans), x=[(b - a) / GIB for a, b in spans], base=[a / GIB for a, _ in spans],
                orientation="h", name=name, showlegend=show, width=0.6, hovertext=hover, hoverinfo="text",
                marker=dict(color=color, line=dict(color="white", width=1),
                            pattern=dict(shape=pattern, fgcolor="#999" if pattern == "." else None)))


def budget_figure(plan: "ReservationPlan") -> go.Figure:
    """The card's memory as one bar: the weights, each admitted sequence's reservation (the part requests fill by
    the time they end, on average, and the part left unused), what is left of the budget, and the share kept back
    for the CUDA context and activations. Sequences that do not fit stick out past the budget on a second row.
    Six traces whatever the numbers (segments of one trace share it), so a redraw only moves bars."""
    W, slot, n = plan.weight_bytes, plan.slot_bytes, plan.admitted
    used = round(slot * plan.used_share)
    starts = [W + i * slot for i in range(n)]
    card, over = "显存", "放不下"
    usable = float(plan.fit.usable)
    fig = new_figure(f"{plan.gpu}：{plan.model.label} 的权重 + {plan.wanted} 条序列 × 每条预留 {plan.reserved_tokens:,} 个 "
                     f"token（{format_bytes(slot)}）", height=330, width=WIDE)
    _segments(fig, card, [(0, W)], f"权重 {format_bytes(W)}", WEIGHT_COLOR, [f"权重：{format_bytes(W)}"])
    _segments(fig, card, [(a, a + used) for a in starts], "预留中请求结束时平均填到的部分", USED_COLOR,
              [f"第 {i + 1} 条序列：平均填到 {format_bytes(used)}" for i in range(n)], show=n > 0)
    _segments(fig, card, [(a + used, a + slot) for a in starts], "预留中平均闲置的部分", UNUSED_COLOR,
              [f"第 {i + 1} 条序列：平均闲置 {format_bytes(slot - used)}" for i in range(n)], show=n > 0)
    end = W + n * slot
    refused = plan.wanted - n
    left = plan.budget_bytes - end
    _segments(fig, card, [(end, plan.budget_bytes)], f"预算内剩余 {format_bytes(left)}"
              + ("（不够再放 1 条）" if refused else ""), FREE_COLOR, [f"预算内剩余：{format_bytes(left)}"])
    kept = plan.total_bytes - plan.budget_bytes
    _segments(fig, card, [(plan.budget_bytes, plan.total_bytes)],
              f"留给 CUDA 上下文等开销（{1 - usable:.0%}）{format_bytes(kept)}", "#f2f2f2",
              [f"不参与规划：{format_bytes(kept)}"], pattern=".")
    _segments(fig, over, [(end, end + refused * slot)] if refused else [],
              f"放不下的 {refused} 条序列 {format_bytes(refused * slot)}", OVER_COLOR,
              ["超出预算"] if refused else [], pattern="/", show=refused > 0)
    for x, text, dash in ((plan.budget_bytes, f"可用 × {usable:g} = {format_bytes(plan.budget_bytes)}", "dash"),
                          (plan.total_bytes, f"总显存 {format_bytes(plan.total_bytes)}", "solid")):
        fig.add_vline(x=x / GIB, line=dict(color="#000" if dash == "dash" else "#888", dash=dash, width=2))
        fig.add_annotation(x=x / GIB, y=1, yref="paper", yanchor="bottom", showarrow=False, text=text,
                           xanchor="right" if dash == "dash" else "left")
    fig.update_layout(barmode="overlay", legend=dict(orientation="h", x=0, y=-0.55, traceorder="normal"),
                      margin=dict(t=80, b=130, l=70))
    fig.update_yaxes(categoryorder="array", categoryarray=[over, card])
    fig.update_xaxes(title=axis_title("显存", "GiB"), rangemode="tozero")
    return fig


def reservation_figure(sweep: Sequence["ReservationPlan"], current: "ReservationPlan",
                       too_long_limit: float) -> go.Figure:
    """As the reservation per sequence grows (up to the model's context): how many sequences fit (left), and what
    share of each reservation sits unused and what share of requests does not fit in it (right). Reservations
    that cut off more than ``too_long_limit`` of the requests (``plan.cuts_too_many``) are drawn grey on the left:
    most of the extra sequences they admit are truncated ones. The current setting is marked."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("能同时服务的序列数", "预留的浪费 vs 放不下的请求"))
    R = [p.reserved_tokens for p in sweep]
    ok = [i for i, p in enumerate(sweep) if not p.cuts_too_many]
    cut = [i for i, p in enumerate(sweep) if p.cuts_too_many]
    if cut and ok:
        cut.append(ok[0])  # joins the grey part to the solid one
    fig.add_scatter(x=[R[i] for i in cut], y=[sweep[i].capacity for i in cut], mode="lines+markers",
                    name=f"固定预留，但超过 {too_long_limit:.0%} 的请求比 R 长（多出的序列大多被截断）",
                    line=dict(color="#aaa", width=2, dash="dot"), marker=dict(size=6), row=1, col=1)
    fig.add_scatter(x=[R[i] for i in ok], y=[sweep[i].capacity for i in ok], mode="lines+markers",
                    name="固定预留：放得下的序列数", line=dict(color=PALETTE[0], width=3), row=1, col=1)
    fig.add_scatter(x=[R[0], R[-1]], y=[current.paged_capacity] * 2, mode="lines",
                    name=f"按需分页（平均，不截断）：约 {current.paged_capacity:.1f} 条",
                    line=dict(color=PALETTE[2], dash="dash"), row=1, col=1)
    fig.add_scatter(x=R, y=[100 * (1 - p.used_share) for p in sweep], mode="lines+markers", name="预留中闲置的比例",
                    line=dict(color=USED_COLOR, width=3), row=1, col=2)
    fig.add_scatter(x=R, y=[100 * p.too_long_share for p in sweep], mode="lines+markers", name="比预留长的请求",
                    line=dict(color=DIFF_COLOR, width=3), row=1, col=2)
    fig.add_scatter(x=[R[0], R[-1]], y=[100 * too_long_limit] * 2, mode="lines", showlegend=False,
                    line=dict(color="#aaa", dash="dot"), hoverinfo="skip", row=1, col=2)
    context = current.model.context_length
    if R[-1] > context:  # the sweep passes the context (the reservation does): mark where it ends
        for col, y in ((1, [0, max(p.capacity for p in sweep) * 10 + 10]), (2, [0, 100])):
            fig.add_scatter(x=[context, context], y=y, mode="lines", line=dict(color="#999", dash="dot"),
                            name=f"模型的上下文 {context:,}", showlegend=col == 1, hoverinfo="skip", row=1, col=col)
    mark = dict(mode="markers", marker=dict(size=13, color="#000", symbol="circle-open", line=dict(width=3)),
                showlegend=False)
    fig.add_scatter(x=[current.reserved_tokens], y=[current.capacity], name="当前", **mark, row=1, col=1)
    fig.add_scatter(x=[current.reserved_tokens] * 2,
                    y=[100 * (1 - current.used_share), 100 * current.too_long_share], name="当前", **mark, row=1, col=2)
    ticks = [r for r in R if r & (r - 1) == 0][::2 if len(R) > 14 else 1]  # powers of two (every other when many)
    fig.update_xaxes(type="log", title=axis_title("每条序列预留", "tokens，对数刻度"), tickvals=ticks,
                     ticktext=[f"{r:,}" for r in ticks])
    shown = [current.paged_capacity, current.capacity] + [sweep[i].capacity for i in ok]
    top = 1.5 * max(max(shown), 1)  # the grey part may leave the top: it counts truncated requests
    fig.update_yaxes(title=axis_title("序列数", "条"), range=[0, top], row=1, col=1)
    fig.update_yaxes(title=axis_title("比例", "%"), range=[0, 100], row=1, col=2)
    fig.add_annotation(text=f"{too_long_limit:.0%}", x=math.log10(R[-1]), y=100 * too_long_limit, xref="x2", yref="y2",
                       xanchor="left", yanchor="bottom", showarrow=False, font=dict(color="#888"))
    return apply_template(fig, f"{current.gpu} + {current.model.label}（{current.spread.label}）：预留越多，放下的序列越少、"
                               f"闲置越多（模型的上下文 {context:,}）", 400, legend_below=True)


# -- the lab -----------------------------------------------------------------------------------------------
def divergence_figure(run: "BugRun", label: str, tolerance: float, floor: float = 1e-7) -> go.Figure:
    """Per generated token: the largest logit difference against the uncached reference (log scale, floored at
    ``floor`` so an exact 0 can be drawn), green where the token is the same, red where it differs; a dashed
    line at ``tolerance``, the largest difference float rounding explains."""
    steps = list(range(1, len(run.logit_diff) + 1))
    same = [a == b for a, b in zip(run.reference, run.output)]
    first = run.first_token_step
    title = (f"{label}：{len(steps)} 步全部与参考相同" if first is None
             else f"{label}：第 {first} 步起 token 与参考不同（logits 从第 {run.first_logit_step} 步起偏离）")
    fig = new_figure(title + "<br><sup>每一步的参考：不用缓存的模型读这个缓存已经写出的同一段上文</sup>", height=400,
                     width=WIDE)
    fig.add_bar(x=steps, y=[max(d, floor) for d in run.logit_diff], name="logits 的最大差异", showlegend=False,
                marker_color=[SAME_COLOR if s else DIFF_COLOR for s in same],
                customdata=[f"参考「{a}」，这个缓存「{b}」" for a, b in zip(run.reference, run.output)],
                hovertemplate="第 %{x} 步：%{y:.2e}<br>%{customdata}<extra></extra>")
    fig.add_hline(y=tolerance, line=dict(color="#555", dash="dash"))
    fig.add_scatter(x=[None], y=[None], mode="lines", line=dict(color="#555", dash="dash"),
                    name=f"浮点误差的上限（{tolerance:g}）")
    fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(color=SAME_COLOR, symbol="square", size=10),
                    name="token 相同")
    fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(color=DIFF_COLOR, symbol="square", size=10),
                    name="token 不同")
    fig.update_xaxes(title=axis_title("生成的第几个 token", "步"), dtick=2 if len(steps) > 24 else 1)
    top = max(2.0, math.log10(max(run.logit_diff + [floor])) + 0.3)
    powers = list(range(math.ceil(math.log10(floor)), math.floor(top) + 1, 2))
    fig.update_yaxes(type="log", title=axis_title("logits 差异", "对数刻度"), range=[math.log10(floor) - 0.5, top],
                     tickvals=[10.0**p for p in powers], ticktext=[f"10<sup>{p}</sup>" if p else "1" for p in powers],
                     title_standoff=10)
    # the legend under the x-axis title: above the plot it would cover the title's second line
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.3, yanchor="top"), margin=dict(t=90, b=110, l=80),
                      bargap=0.2)
    return fig
