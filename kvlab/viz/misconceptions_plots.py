"""Plot builders of chapter 3.5 (misconceptions, the find-the-bug lab): pure functions, results in, figures out."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..memory import format_bytes, iec_unit
from ..phrases import Phrasebook
from .style import MODE_COLORS, MODE_LABELS, PALETTE, WIDE, apply_template, axis_title, new_figure

if TYPE_CHECKING:  # the lesson's result types (the lesson imports this module)
    from ..lessons.misconceptions import BugRun, CacheRun, ReservationPlan
    from ..measure import DecodeTiming

GIB = 2**30
WEIGHT_COLOR, USED_COLOR, UNUSED_COLOR, FREE_COLOR, OVER_COLOR = PALETTE[0], PALETTE[1], "#f3d9a4", "#d9d9d9", "#D55E00"
SAME_COLOR, DIFF_COLOR = PALETTE[2], PALETTE[3]

# Every title, axis, legend entry, note and hover text of these figures, looked up when a figure is built (a notebook
# sets the language after importing kvlab).
PLOTS = Phrasebook("misconceptions.plots", {
    "zh": {
        # misconception 1
        "weights_title": "权重不变，缓存随 B × S 增长（B = {batch}，S = {stored}：已写入 {written}，权重 {weights}）",
        "per_token_line": "每个 token {per_token}：B × S × {per_token}",
        "weights_line": "权重（参数）：校验和 {before} → {after}",
        "cache_hover": "B × S = %{{x:,}} 个 token：%{{y:.3g}} {unit}<extra></extra>",
        "allocated": "KV Cache 已分配：{allocated}（预分配，预填充之前就这么大）",
        "allocated_hover": "已分配 {allocated}<extra></extra>",
        "written_prefill": "KV Cache 已写入，预填充：一次写入整段提示词",
        "written_decode": "KV Cache 已写入，解码：每步每条序列多 1 个 token",
        "tokens_axis": "缓存里的 token 总数 B × S",
        "bytes_axis": "字节",
        # misconception 2
        "step_time_title": "每一步的耗时（本机实测）",
        "k_title": "每步投影 K 的 token 数",
        "v_title": "每步投影 V 的 token 数",
        "k_note": "只缓存 K 与有缓存重合：1",
        "v_note": "只缓存 K 与无缓存重合：t",
        "length_axis": "序列长度 t",
        "step_axis": "单步耗时",
        "count_axis": "token 数",
        "log_scale": "对数刻度",
        "k_only_title": "无缓存、只缓存 K、缓存 K 和 V：同样的 token，不同的代价（数字来自 trace）",
        # misconception 3: the card
        "card": "显存",
        "over": "放不下",
        "budget_title": "{gpu}：{model} 的权重 + {wanted} 条序列 × 每条预留 {reserved:,} 个 token（{slot}）",
        "weights": "权重 {weights}",
        "weights_hover": "权重：{weights}",
        "filled": "预留中请求结束时平均填到的部分",
        "filled_hover": "第 {i} 条序列：平均填到 {used}",
        "idle": "预留中平均闲置的部分",
        "idle_hover": "第 {i} 条序列：平均闲置 {idle}",
        "left": "预算内剩余 {left}",
        "left_no_room": "预算内剩余 {left}（不够再放 1 条）",
        "left_hover": "预算内剩余：{left}",
        "kept": "预留（{share:.0%}，不做规划）{kept}",
        "kept_hover": "不做规划：{kept}",
        "refused": "放不下的 {refused} 条序列 {bytes}",
        "refused_hover": "超出预算",
        "budget_line": "可用 × {usable:g} = {budget}",
        "total_line": "总显存 {total}",
        "memory_axis": "显存",
        # misconception 3: the trade-off
        "capacity_title": "能同时服务的序列数",
        "waste_title": "预留的浪费 vs 放不下的请求",
        "cut": "固定预留，但超过 {limit:.0%} 的请求比 R 长（多出的序列大多被截断）",
        "fixed": "固定预留：放得下的序列数",
        "paged": "按需分页（平均，不截断）：约 {capacity:.1f} 条",
        "idle_share": "预留中闲置的比例",
        "too_long": "比预留长的请求",
        "context": "模型的上下文 {context:,}",
        "current": "当前",
        "reserve_axis": "每条序列预留",
        "reserve_unit": "tokens，对数刻度",
        "sequences_axis": "序列数",
        "sequences_unit": "条",
        "share_axis": "比例",
        "trade_title": "{gpu} + {model}（{spread}）：预留越多，放下的序列越少、闲置越多（模型的上下文 {context:,}）",
        # the lab
        "lab_same": "{label}：{steps} 步全部与参考相同",
        "lab_differs": "{label}：第 {first} 步起 token 与参考不同（logits 从第 {logit} 步起偏离）",
        "lab_reference": "{title}<br><sup>每一步的参考：不用缓存的模型读这个缓存已经写出的同一段上文</sup>",
        "logit_diff": "logits 的最大差异",
        "pair": "参考「{reference}」，这个缓存「{output}」",
        "step_hover": "第 %{{x}} 步：%{{y:.2e}}<br>%{{customdata}}<extra></extra>",
        "tolerance": "浮点误差的上限（{tolerance:g}）",
        "same": "token 相同",
        "different": "token 不同",
        "token_axis": "生成的第几个 token",
        "step_unit": "步",
        "diff_axis": "logits 差异",
    },
    "en": {
        "weights_title": "The weights stay, the cache grows with B × S (B = {batch}, S = {stored}: {written} written, "
                         "weights {weights})",
        "per_token_line": "{per_token} per token: B × S × {per_token}",
        "weights_line": "Weights (parameters): checksum {before} → {after}",
        "cache_hover": "B × S = %{{x:,}} tokens: %{{y:.3g}} {unit}<extra></extra>",
        "allocated": "KV cache allocated: {allocated} (preallocated: this size before the prefill)",
        "allocated_hover": "{allocated} allocated<extra></extra>",
        "written_prefill": "KV cache written, prefill: the whole prompt at once",
        "written_decode": "KV cache written, decode: 1 more token per sequence each step",
        "tokens_axis": "Tokens in the cache, B × S",
        "bytes_axis": "Bytes",
        "step_time_title": "Time of each step (measured here)",
        "k_title": "Tokens whose K each step projects",
        "v_title": "Tokens whose V each step projects",
        "k_note": "K only and with a cache coincide: 1",
        "v_note": "K only and no cache coincide: t",
        "length_axis": "Sequence length t",
        "step_axis": "Step time",
        "count_axis": "Tokens",
        "log_scale": "log scale",
        "k_only_title": "No cache, K only, K and V cached: the same tokens at different costs (numbers from the trace)",
        "card": "Memory",
        "over": "Does not fit",
        "budget_title": "{gpu}: {model}'s weights + {wanted} sequences × {reserved:,} tokens reserved each ({slot})",
        "weights": "Weights {weights}",
        "weights_hover": "Weights: {weights}",
        "filled": "Part of a reservation filled by the time a request ends (mean)",
        "filled_hover": "Sequence {i}: {used} filled on average",
        "idle": "Part of a reservation idle (mean)",
        "idle_hover": "Sequence {i}: {idle} idle on average",
        "left": "Left in the budget: {left}",
        "left_no_room": "Left in the budget: {left} (not enough for 1 more)",
        "left_hover": "Left in the budget: {left}",
        "kept": "Held back ({share:.0%}, left out of the plan): {kept}",
        "kept_hover": "Left out of the plan: {kept}",
        "refused": "{refused} sequences that do not fit: {bytes}",
        "refused_hover": "Over the budget",
        "budget_line": "usable × {usable:g} = {budget}",
        "total_line": "total memory {total}",
        "memory_axis": "GPU memory",
        "capacity_title": "Sequences served at once",
        "waste_title": "Reservation wasted vs requests that do not fit",
        "cut": "Fixed reservation, but over {limit:.0%} of requests longer than R (most extra sequences truncated)",
        "fixed": "Fixed reservation: sequences that fit",
        "paged": "Paging on demand (mean, none truncated): about {capacity:.1f}",
        "idle_share": "Share of the reservation idle",
        "too_long": "Requests longer than the reservation",
        "context": "The model's context, {context:,}",
        "current": "Current",
        "reserve_axis": "Reserved per sequence",
        "reserve_unit": "tokens, log scale",
        "sequences_axis": "Sequences",
        "sequences_unit": "count",
        "share_axis": "Share",
        "trade_title": "{gpu} + {model} ({spread}): the more reserved, the fewer sequences fit and the more sits idle "
                       "(the model's context: {context:,})",
        "lab_same": "{label}: all {steps} steps match the reference",
        "lab_differs": "{label}: tokens differ from the reference from step {first} on (logits drift from step "
                       "{logit} on)",
        "lab_reference": "{title}<br><sup>Each step's reference: the model without a cache, reading the same text "
                         "this cache has written so far</sup>",
        "logit_diff": "Largest logit difference",
        "pair": "Reference \"{reference}\", this cache \"{output}\"",
        "step_hover": "Step %{{x}}: %{{y:.2e}}<br>%{{customdata}}<extra></extra>",
        "tolerance": "Float rounding's limit ({tolerance:g})",
        "same": "Same token",
        "different": "Different token",
        "token_axis": "Generated token",
        "step_unit": "step",
        "diff_axis": "Logit difference",
    },
})
say = PLOTS.say


# -- misconception 1 ---------------------------------------------------------------------------------
def weights_vs_cache_figure(run: "CacheRun", x_max: int) -> go.Figure:
    """Bytes against the tokens in the cache (B x S): the weights a flat line, the cache's written bytes growing
    pass by pass along the line of its bytes per token up to the preallocated size (a dotted line, allocated
    before the prefill). Axes are fixed by ``x_max`` so moving a control moves the points."""
    B = run.batch_size
    unit, size = iec_unit(max(run.after.n_bytes, x_max * run.per_token_bytes))
    tokens = [0] + [B * s for s in run.seq_lens]  # before the prefill, then after each pass (B x S)
    cache = [0] + list(run.cache_bytes)
    fig = new_figure(say("weights_title", batch=B, stored=run.stored_tokens, written=format_bytes(run.final_bytes),
                         weights=format_bytes(run.after.n_bytes)), height=400, width=WIDE)
    fig.add_scatter(x=[0, x_max], y=[0, x_max * run.per_token_bytes / size], mode="lines",
                    name=say("per_token_line", per_token=format_bytes(run.per_token_bytes)),
        line=dict(color="#bbb", dash="dot"), hoverinfo="skip")
    fig.add_scatter(x=[0, x_max], y=[run.before.n_bytes / size, run.after.n_bytes / size], mode="lines",
                    name=say("weights_line", before=run.before.checksum[:8], after=run.after.checksum[:8]),
                    line=dict(color=WEIGHT_COLOR, width=3))
    hover = say("cache_hover", unit=unit)
    fig.add_scatter(x=[0, tokens[-1]], y=[run.allocated_bytes / size] * 2, mode="lines",
                    name=say("allocated", allocated=format_bytes(run.allocated_bytes)),
                    line=dict(color=USED_COLOR, width=2, dash="dot"),
                    hovertemplate=say("allocated_hover", allocated=format_bytes(run.allocated_bytes)))
    fig.add_scatter(x=tokens[:2], y=[b / size for b in cache[:2]], mode="lines+markers",
                    name=say("written_prefill"), line=dict(color=USED_COLOR, width=2, dash="dash"),
                    marker=dict(size=7), hovertemplate=hover)
    fig.add_scatter(x=tokens[1:], y=[b / size for b in cache[1:]], mode="lines+markers",
                    name=say("written_decode"), line=dict(color=USED_COLOR, width=3),
                    marker=dict(size=5), hovertemplate=hover)
    fig.update_xaxes(title=axis_title(say("tokens_axis"), "tokens"), range=[0, x_max * 1.02])
    top = max(run.after.n_bytes, x_max * run.per_token_bytes) / size
    fig.update_yaxes(title=axis_title(say("bytes_axis"), unit), range=[0, top * 1.08])
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.3), margin=dict(b=130), height=440)
    return fig


# -- misconception 2 ---------------------------------------------------------------------------------
def k_only_figure(timings: dict[str, "DecodeTiming"]) -> go.Figure:
    """Left: measured time of each decode step. Middle and right: tokens whose K and whose V each step projected
    (from the trace), on log axes so the lines at 1 stay visible beside those at t. Lines that coincide are drawn
    wide under thin so both stay visible; a note with an arrow names each coincidence."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, column_widths=[0.44, 0.28, 0.28],
                        subplot_titles=(say("step_time_title"), say("k_title"), say("v_title")))
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
    fig.add_annotation(text=say("k_note"), x=mid, y=0, xref="x2", yref="y2", ax=0, ay=-40,
                       showarrow=True, arrowhead=2, arrowcolor="#777", font=dict(color="#555"),
                       bgcolor="rgba(255,255,255,0.85)")
    fig.add_annotation(text=say("v_note"), x=mid, y=math.log10(mid), xref="x3", yref="y3", ax=10,
                       ay=55, showarrow=True, arrowhead=2, arrowcolor="#777", font=dict(color="#555"),
                       bgcolor="rgba(255,255,255,0.85)")
    fig.update_xaxes(title=axis_title(say("length_axis"), "tokens"))
    fig.update_yaxes(title=axis_title(say("step_axis"), "ms"), rangemode="tozero", row=1, col=1)
    for col in (2, 3):  # (the subplot titles name the quantity)
        fig.update_yaxes(type="log", range=[-0.3, top], dtick=1, title=axis_title(say("count_axis"), say("log_scale")), row=1,
                         col=col)
    return apply_template(fig, say("k_only_title"), 420,
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
    the time they end, on average, and the part left unused), what is left of the budget, and the share held back
    (left out of the plan, as in 3.4). Sequences that do not fit stick out past the budget on a second row.
    Six traces whatever the numbers (segments of one trace share it), so a redraw only moves bars."""
    W, slot, n = plan.weight_bytes, plan.slot_bytes, plan.admitted
    used = round(slot * plan.used_share)
    starts = [W + i * slot for i in range(n)]
    card, over = say("card"), say("over")
    usable = float(plan.fit.usable)
    fig = new_figure(say("budget_title", gpu=plan.gpu, model=plan.model.label, wanted=plan.wanted,
                         reserved=plan.reserved_tokens, slot=format_bytes(slot)), height=330, width=WIDE)
    _segments(fig, card, [(0, W)], say("weights", weights=format_bytes(W)), WEIGHT_COLOR,
              [say("weights_hover", weights=format_bytes(W))])
    _segments(fig, card, [(a, a + used) for a in starts], say("filled"), USED_COLOR,
              [say("filled_hover", i=i + 1, used=format_bytes(used)) for i in range(n)], show=n > 0)
    _segments(fig, card, [(a + used, a + slot) for a in starts], say("idle"), UNUSED_COLOR,
              [say("idle_hover", i=i + 1, idle=format_bytes(slot - used)) for i in range(n)], show=n > 0)
    end = W + n * slot
    refused = plan.wanted - n
    left = plan.budget_bytes - end
    _segments(fig, card, [(end, plan.budget_bytes)], say("left_no_room" if refused else "left", left=format_bytes(left)),
              FREE_COLOR, [say("left_hover", left=format_bytes(left))])
    kept = plan.total_bytes - plan.budget_bytes
    _segments(fig, card, [(plan.budget_bytes, plan.total_bytes)],
              say("kept", share=1 - usable, kept=format_bytes(kept)), "#f2f2f2",
              [say("kept_hover", kept=format_bytes(kept))], pattern=".")
    _segments(fig, over, [(end, end + refused * slot)] if refused else [],
              say("refused", refused=refused, bytes=format_bytes(refused * slot)), OVER_COLOR,
              [say("refused_hover")] if refused else [], pattern="/", show=refused > 0)
    for x, text, dash in ((plan.budget_bytes, say("budget_line", usable=usable, budget=format_bytes(plan.budget_bytes)),
                           "dash"),
                          (plan.total_bytes, say("total_line", total=format_bytes(plan.total_bytes)), "solid")):
        fig.add_vline(x=x / GIB, line=dict(color="#000" if dash == "dash" else "#888", dash=dash, width=2))
        fig.add_annotation(x=x / GIB, y=1, yref="paper", yanchor="bottom", showarrow=False, text=text,
                           xanchor="right" if dash == "dash" else "left")
    fig.update_layout(barmode="overlay", legend=dict(orientation="h", x=0, y=-0.55, traceorder="normal"),
                      margin=dict(t=80, b=130, l=70))
    fig.update_yaxes(categoryorder="array", categoryarray=[over, card])
    fig.update_xaxes(title=axis_title(say("memory_axis"), "GiB"), rangemode="tozero")
    return fig


def reservation_figure(sweep: Sequence["ReservationPlan"], current: "ReservationPlan",
                       too_long_limit: float) -> go.Figure:
    """As the reservation per sequence grows (up to the model's context): how many sequences fit (left), and what
    share of each reservation sits unused and what share of requests does not fit in it (right). Reservations
    that cut off more than ``too_long_limit`` of the requests (``plan.cuts_too_many``) are drawn grey on the left:
    most of the extra sequences they admit are truncated ones. The current setting is marked."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=(say("capacity_title"), say("waste_title")))
    R = [p.reserved_tokens for p in sweep]
    ok = [i for i, p in enumerate(sweep) if not p.cuts_too_many]
    cut = [i for i, p in enumerate(sweep) if p.cuts_too_many]
    if cut and ok:
        cut.append(ok[0])  # joins the grey part to the solid one
    fig.add_scatter(x=[R[i] for i in cut], y=[sweep[i].capacity for i in cut], mode="lines+markers",
                    name=say("cut", limit=too_long_limit),
                    line=dict(color="#aaa", width=2, dash="dot"), marker=dict(size=6), row=1, col=1)
    fig.add_scatter(x=[R[i] for i in ok], y=[sweep[i].capacity for i in ok], mode="lines+markers",
                    name=say("fixed"), line=dict(color=PALETTE[0], width=3), row=1, col=1)
    fig.add_scatter(x=[R[0], R[-1]], y=[current.paged_capacity] * 2, mode="lines",
                    name=say("paged", capacity=current.paged_capacity),
                    line=dict(color=PALETTE[2], dash="dash"), row=1, col=1)
    fig.add_scatter(x=R, y=[100 * (1 - p.used_share) for p in sweep], mode="lines+markers", name=say("idle_share"),
                    line=dict(color=USED_COLOR, width=3), row=1, col=2)
    fig.add_scatter(x=R, y=[100 * p.too_long_share for p in sweep], mode="lines+markers", name=say("too_long"),
                    line=dict(color=DIFF_COLOR, width=3), row=1, col=2)
    fig.add_scatter(x=[R[0], R[-1]], y=[100 * too_long_limit] * 2, mode="lines", showlegend=False,
                    line=dict(color="#aaa", dash="dot"), hoverinfo="skip", row=1, col=2)
    context = current.model.context_length
    if R[-1] > context:  # the sweep passes the context (the reservation does): mark where it ends
        for col, y in ((1, [0, max(p.capacity for p in sweep) * 10 + 10]), (2, [0, 100])):
            fig.add_scatter(x=[context, context], y=y, mode="lines", line=dict(color="#999", dash="dot"),
                            name=say("context", context=context), showlegend=col == 1, hoverinfo="skip", row=1, col=col)
    mark = dict(mode="markers", marker=dict(size=13, color="#000", symbol="circle-open", line=dict(width=3)),
                showlegend=False)
    fig.add_scatter(x=[current.reserved_tokens], y=[current.capacity], name=say("current"), **mark, row=1, col=1)
    fig.add_scatter(x=[current.reserved_tokens] * 2,
                    y=[100 * (1 - current.used_share), 100 * current.too_long_share], name=say("current"), **mark, row=1, col=2)
    ticks = [r for r in R if r & (r - 1) == 0][::2 if len(R) > 14 else 1]  # powers of two (every other when many)
    fig.update_xaxes(type="log", title=axis_title(say("reserve_axis"), say("reserve_unit")), tickvals=ticks,
                     ticktext=[f"{r:,}" for r in ticks])
    shown = [current.paged_capacity, current.capacity] + [sweep[i].capacity for i in ok]
    top = 1.5 * max(max(shown), 1)  # the grey part may leave the top: it counts truncated requests
    fig.update_yaxes(title=axis_title(say("sequences_axis"), say("sequences_unit")), range=[0, top], row=1, col=1)
    fig.update_yaxes(title=axis_title(say("share_axis"), "%"), range=[0, 100], row=1, col=2)
    fig.add_annotation(text=f"{too_long_limit:.0%}", x=math.log10(R[-1]), y=100 * too_long_limit, xref="x2", yref="y2",
                       xanchor="left", yanchor="bottom", showarrow=False, font=dict(color="#888"))
    return apply_template(fig, say("trade_title", gpu=current.gpu, model=current.model.label,
                                   spread=current.spread.label, context=context), 400, legend_below=True)


# -- the lab -----------------------------------------------------------------------------------------------
def divergence_figure(run: "BugRun", label: str, tolerance: float, floor: float = 1e-7) -> go.Figure:
    """Per generated token: the largest logit difference against the uncached reference (log scale, floored at
    ``floor`` so an exact 0 can be drawn), green where the token is the same, red where it differs; a dashed
    line at ``tolerance``, the largest difference float rounding explains."""
    steps = list(range(1, len(run.logit_diff) + 1))
    same = [a == b for a, b in zip(run.reference, run.output)]
    first = run.first_token_step
    title = (say("lab_same", label=label, steps=len(steps)) if first is None
             else say("lab_differs", label=label, first=first, logit=run.first_logit_step))
    fig = new_figure(say("lab_reference", title=title), height=400, width=WIDE)
    fig.add_bar(x=steps, y=[max(d, floor) for d in run.logit_diff], name=say("logit_diff"), showlegend=False,
                marker_color=[SAME_COLOR if s else DIFF_COLOR for s in same],
                customdata=[say("pair", reference=a, output=b) for a, b in zip(run.reference, run.output)],
                hovertemplate=say("step_hover"))
    fig.add_hline(y=tolerance, line=dict(color="#555", dash="dash"))
    fig.add_scatter(x=[None], y=[None], mode="lines", line=dict(color="#555", dash="dash"),
                    name=say("tolerance", tolerance=tolerance))
    fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(color=SAME_COLOR, symbol="square", size=10),
                    name=say("same"))
    fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(color=DIFF_COLOR, symbol="square", size=10),
                    name=say("different"))
    fig.update_xaxes(title=axis_title(say("token_axis"), say("step_unit")), dtick=2 if len(steps) > 24 else 1)
    top = max(2.0, math.log10(max(run.logit_diff + [floor])) + 0.3)
    powers = list(range(math.ceil(math.log10(floor)), math.floor(top) + 1, 2))
    fig.update_yaxes(type="log", title=axis_title(say("diff_axis"), say("log_scale")), range=[math.log10(floor) - 0.5, top],
                     tickvals=[10.0**p for p in powers], ticktext=[f"10<sup>{p}</sup>" if p else "1" for p in powers],
                     title_standoff=10)
    # the legend under the x-axis title: above the plot it would cover the title's second line
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.3, yanchor="top"), margin=dict(t=90, b=110, l=80),
                      bargap=0.2)
    return fig
