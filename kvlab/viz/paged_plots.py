"""Plot builders of chapter 3.6 (the paged cache, shared prefixes, continuous batching): results in, figures out."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..paging import block_fill, blocks_for
from ..stats import cumulative
from .storage_plots import EMPTY, TAIL, _rects, owner_color
from .style import PALETTE, apply_template, axis_title

if TYPE_CHECKING:  # the lesson's result types (the lesson imports this module)
    from ..lessons.paged.batching import BatchingComparison
    from ..lessons.paged.cost import PagingCost
    from ..lessons.paged.runs import WasteTimeline
    from ..paging import SharedPrefix
    from ..serving import ServeRun, StepRecord

SCHEME_NAMES = {"padding": "填充到最长（3.2）", "reservation": "按固定长度预留（3.5）", "paging": "分页"}
SCHEME_COLORS = {"padding": "#D55E00", "reservation": "#CC79A7", "paging": PALETTE[0]}
POLICY_NAMES = {"static": "静态批处理", "continuous": "连续批处理"}
POLICY_COLORS = {"static": "#D55E00", "continuous": PALETTE[0]}
WAIT_COLOR, SHARED_COLOR, COPY_COLOR, NEXT_COLOR = "#bbbbbb", "#E69F00", "#D55E00", "#000000"
POOL_COLUMNS = 6


def _fill(fig, boxes, color, name, row, col, legend=True, hover=None, group=None, line=None):
    xs, ys = _rects(boxes)
    fig.add_scatter(x=xs, y=ys, fill="toself", fillcolor=color, mode="lines", name=name,
                    line=dict(color=line or color, width=2 if line else 0), legendgroup=group or name,
                    showlegend=legend, hoveron="fills" if hover else None, hoverinfo="text" if hover else "skip",
                    text=hover, row=row, col=col)


# -- the block-table animation ----------------------------------------------------------------------------
def block_state(frame: "StepRecord", block_size: int) -> dict[int, tuple[int, int, int]]:
    """block id -> (owner rid, its index in the owner's table, tokens it holds) after ``frame``'s step."""
    out = {}
    for rid, blocks in frame.tables.items():
        n = frame.lengths[rid]
        for i, b in enumerate(blocks):
            out[b] = (rid, i, block_fill(n, i, block_size))
    return out


def block_table_figure(run: "ServeRun", index: int) -> go.Figure:
    """Step ``index`` of ``run``: the pool (every block in its owner's colour, filled up to the tokens it holds,
    free blocks grey, the next one handed out outlined) and each request's block table (its blocks in order)."""
    frame = run.steps[index]
    bs, n_blocks = run.block_size, run.num_blocks
    state = block_state(frame, bs)
    rids = [o.request.rid for o in run.outcomes]
    widest = max((len(t) for s in run.steps for t in s.tables.values()), default=1)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.08,
                        subplot_titles=(f"块池：{n_blocks} 块，每块 {bs} 个 token（{frame.blocks_in_use} 块在用）",
                                        "每个请求的块表（格子里是物理块号）"))
    rows = math.ceil(n_blocks / POOL_COLUMNS)
    for rid in rids:
        mine = [(b, i, used) for b, (owner, i, used) in state.items() if owner == rid]
        if not mine:
            continue
        used_boxes = [(c + 0.05, c + 0.05 + 0.9 * used / bs, r + 0.1, r + 0.9) for b, _, used in mine
                      for r, c in [divmod(b, POOL_COLUMNS)]]
        hover = "<br>".join(f"块 {b}：请求 {rid} 的第 {i} 块，{used}/{bs} 个 token" for b, i, used in mine)
        _fill(fig, used_boxes, owner_color(rid), f"请求 {rid}", 1, 1, hover=hover, group=f"r{rid}")
    tails = [(c + 0.05 + 0.9 * used / bs, c + 0.95, r + 0.1, r + 0.9) for b, (_, _, used) in state.items()
             if used < bs for r, c in [divmod(b, POOL_COLUMNS)]]
    if tails:
        _fill(fig, tails, TAIL, "块里还空着的位置", 1, 1)
    free = [(c + 0.05, c + 0.95, r + 0.1, r + 0.9) for b in frame.free for r, c in [divmod(b, POOL_COLUMNS)]]
    if free:
        _fill(fig, free, EMPTY, "空闲块", 1, 1)
    if frame.free:
        r, c = divmod(frame.free[0], POOL_COLUMNS)
        xs, ys = _rects([(c + 0.02, c + 0.98, r + 0.05, r + 0.95)])
        fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color=NEXT_COLOR, width=2, dash="dot"),
                        name="下一个分出去的空闲块", row=1, col=1, hoverinfo="skip")
    fig.add_scatter(x=[b % POOL_COLUMNS + 0.5 for b in range(n_blocks)],
                    y=[b // POOL_COLUMNS + 0.5 for b in range(n_blocks)], mode="text",
                    text=[str(b) for b in range(n_blocks)], textfont=dict(size=12, color="#222"), showlegend=False,
                    hoverinfo="skip", row=1, col=1)
    _tables(fig, run, frame, widest)
    fig.update_xaxes(visible=False, range=[-0.1, POOL_COLUMNS + 0.1], row=1, col=1)
    fig.update_yaxes(visible=False, range=[rows + 0.1, -0.1], row=1, col=1)
    fig.update_xaxes(range=[-0.6, widest + 2.2], tickvals=list(range(widest)), title="块表里的位置（第几块）",
                     row=1, col=2)
    fig.update_yaxes(range=[len(rids) - 0.4, -0.6], tickvals=list(range(len(rids))),
                     ticktext=[f"请求 {rid}" for rid in rids], showgrid=False, row=1, col=2)
    title = f"第 {frame.step} 步（共 {run.steps[-1].step + 1} 步）：" + _frame_status(frame)
    return apply_template(fig, title, 430, legend_below=True)


def _frame_status(frame: "StepRecord") -> str:
    waiting = "、".join(str(r) for r in frame.waiting) or "无"
    return f"{len(frame.running)} 个请求在批次里，等待中：{waiting}，空闲块 {len(frame.free)} 个"


def request_status(run: "ServeRun", frame: "StepRecord", rid: int) -> str:
    """A request that is not in the batch after ``frame``: not arrived, waiting (or preempted), finished."""
    outcome = next(o for o in run.outcomes if o.request.rid == rid)
    if outcome.request.arrival > frame.step:
        return f"第 {outcome.request.arrival} 步到达"
    if outcome.finished <= frame.step:
        return f"第 {outcome.finished} 步已结束"
    return "被抢占，等待" if rid in frame.preempted else "等待"


def _tables(fig, run: "ServeRun", frame: "StepRecord", widest: int) -> None:
    xs, ys, texts = [], [], []
    for y, o in enumerate(run.outcomes):
        rid = o.request.rid
        blocks = frame.tables.get(rid)
        if blocks is None:
            xs.append(widest + 1.1)
            ys.append(y)
            texts.append(request_status(run, frame, rid))
            continue
        boxes = [(i - 0.45, i + 0.45, y - 0.35, y + 0.35) for i in range(len(blocks))]
        _fill(fig, boxes, owner_color(rid), f"请求 {rid}", 1, 2, legend=False, group=f"r{rid}",
              hover=f"请求 {rid}：{frame.lengths[rid]} 个 token，块 {blocks}")
        xs += list(range(len(blocks))) + [widest + 1.1]
        ys += [y] * (len(blocks) + 1)
        texts += [str(b) for b in blocks] + [f"{frame.lengths[rid]} 个 token"]
    fig.add_scatter(x=xs, y=ys, mode="text", text=texts, textfont=dict(size=12, color="#111"), showlegend=False,
                    hoverinfo="skip", row=1, col=2)


# -- waste of three schemes --------------------------------------------------------------------------------
def waste_figure(timeline: "WasteTimeline") -> go.Figure:
    """Left: slots each scheme holds at every step of the run, and the tokens in them. Right: the share of the
    slot-steps that hold no token, per scheme."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.64, 0.36], horizontal_spacing=0.1,
                        subplot_titles=("同一批在跑的请求，三种存法占的 token 槽位", "整段运行里空着的槽位比例"))
    for scheme, name in SCHEME_NAMES.items():
        fig.add_scatter(x=timeline.steps, y=timeline.slots[scheme], mode="lines", name=name,
                        line=dict(color=SCHEME_COLORS[scheme], width=2, shape="hv"), row=1, col=1)
    fig.add_scatter(x=timeline.steps, y=timeline.used, mode="lines", name="真正存着的 token", fill="tozeroy",
                    line=dict(color="#777", width=1, shape="hv"), fillcolor="rgba(120,120,120,0.25)", row=1, col=1)
    shares = [timeline.waste_share(s) for s in SCHEME_NAMES]
    fig.add_bar(x=list(SCHEME_NAMES.values()), y=[100 * s for s in shares], marker_color=list(SCHEME_COLORS.values()),
                text=[f"{100 * s:.1f}%" for s in shares], textposition="outside", showlegend=False, row=1, col=2,
                hovertemplate="%{x}：%{y:.1f}%<extra></extra>")
    fig.update_xaxes(title="步", row=1, col=1)
    fig.update_yaxes(title=axis_title("槽位", "token"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title("空着的比例", "%"), range=[0, 110], row=1, col=2)
    title = (f"浪费：每块 {timeline.block_size} 个 token 的分页，对比每条预留 {timeline.reserve} 个 token"
             + (f"（{timeline.cut} 个请求比预留长）" if timeline.cut else ""))
    return apply_template(fig, title, 420, legend_below=True)


# -- shared prefixes --------------------------------------------------------------------------------------------
def sharing_figure(shared: "SharedPrefix", counts: list[int], with_sharing: list[int], without: list[int]
                   ) -> go.Figure:
    """Left: each request's blocks (the prefix's whole blocks held once, the part-filled one copied on the first
    write). Right: blocks against the number of requests, with and without sharing."""
    bs, p, R = shared.block_size, shared.prefix, len(shared.lengths)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.1,
                        subplot_titles=(f"{R} 个请求的块（每块 {bs} 个 token）", "请求越多，共享省下的越多"))
    full, part = p // bs, p % bs
    own, copies, shared_boxes, tails = [], [], [], []
    for y, n in enumerate(shared.lengths):
        for i in range(blocks_for(n, bs)):
            box = (i + 0.05, i + 0.95, y + 0.12, y + 0.88)
            used = block_fill(n, i, bs) / bs
            if i < full:
                shared_boxes.append(box)
            elif i == full and part and y > 0:
                copies.append((box[0], box[0] + 0.9 * used, box[2], box[3]))
            else:
                own.append((box[0], box[0] + 0.9 * used, box[2], box[3]))
            if used < 1:
                tails.append((box[0] + 0.9 * used, box[1], box[2], box[3]))
    if shared_boxes:
        _fill(fig, shared_boxes, SHARED_COLOR, f"共享的整块（只存 1 份，引用计数 {R}）", 1, 1)
    if own:
        _fill(fig, own, PALETTE[0], "各自的块", 1, 1)
    if copies:
        _fill(fig, copies, PALETTE[5], "写时复制出的块（共享的半满块，第一次写入前先复制一份）", 1, 1, line=COPY_COLOR)
    if tails:
        _fill(fig, tails, TAIL, "块里还空着的位置", 1, 1)
    if p:
        fig.add_scatter(x=[p / bs] * 2, y=[-0.1, R + 0.1], mode="lines", line=dict(color="#333", dash="dash"),
                        name=f"共享的前 {p} 个 token 到这里", row=1, col=1, hoverinfo="skip")
    fig.add_scatter(x=counts, y=without, mode="lines+markers", name="不共享", line=dict(color="#D55E00"), row=1, col=2)
    fig.add_scatter(x=counts, y=with_sharing, mode="lines+markers", name="共享前缀", line=dict(color=PALETTE[0]),
                    row=1, col=2)
    widest = max(blocks_for(n, bs) for n in shared.lengths)
    fig.update_xaxes(title="块表里的位置（第几块）", range=[-0.1, widest + 0.1], dtick=1, row=1, col=1)
    fig.update_yaxes(range=[R + 0.1, -0.1], tickvals=[y + 0.5 for y in range(R)],
                     ticktext=[f"请求 {y}" for y in range(R)], showgrid=False, row=1, col=1)
    fig.update_xaxes(title="请求数", row=1, col=2)
    fig.update_yaxes(title=axis_title("占用的块", "块"), rangemode="tozero", row=1, col=2)
    title = (f"共享前缀：{shared.unshared} 块 → {shared.shared} 块，省下 {shared.saved} 块"
             + (f"，写时复制 {shared.copies} 次" if shared.copies else "，不需要写时复制（前缀恰好是整块）"))
    return apply_template(fig, title, max(380, 60 + 34 * R), legend_below=True)


# -- static against continuous batching --------------------------------------------------------------------------
def _spans(run: "ServeRun", rid: int, starts: list[float], ends: list[float]):
    """(waiting, running) lists of (start s, end s) of ``rid``'s steps, merged where consecutive; step i of ``run``
    lasts from ``starts[i]`` to ``ends[i]``."""
    spans = {"waiting": [], "running": []}
    for s, t0, t1 in zip(run.steps, starts, ends):
        state = "running" if (rid in s.running or rid in s.finished) else "waiting" if rid in s.waiting else None
        if rid in s.prefilled or rid in s.decoded:
            state = "running"
        if state is None:
            continue
        if spans[state] and math.isclose(spans[state][-1][1], t0):
            spans[state][-1] = (spans[state][-1][0], t1)
        else:
            spans[state].append((t0, t1))
    return spans


def timeline_figure(comparison: "BatchingComparison") -> go.Figure:
    """Each request's life under both policies (each step at its fastest measured time): waiting (grey), in the
    batch (colour), its first token (a dot); below, the blocks in use and the requests waiting at each step."""
    fig = make_subplots(rows=2, cols=2, row_heights=[0.7, 0.3], vertical_spacing=0.14, horizontal_spacing=0.07,
                        subplot_titles=[POLICY_NAMES["static"], POLICY_NAMES["continuous"], "占用的块", "等待的请求"])
    end = max(sum(comparison.step_seconds(p)) for p in POLICY_NAMES) * 1e3
    for col, policy in enumerate(("static", "continuous"), start=1):
        run, seconds = comparison.first(policy), comparison.step_seconds(policy)
        ends = [1e3 * t for t in cumulative(seconds)]
        starts = [0.0] + ends[:-1]
        waits, runs_, firsts = [], [], ([], [])
        end_of = dict(zip((s.step for s in run.steps), ends))
        for y, o in enumerate(run.outcomes):
            spans = _spans(run, o.request.rid, starts, ends)
            waits += [(a, b, y - 0.15, y + 0.15) for a, b in spans["waiting"]]
            runs_ += [(a, b, y - 0.35, y + 0.35) for a, b in spans["running"]]
            firsts[0].append(end_of[o.first_token])
            firsts[1].append(y)
        _fill(fig, waits, WAIT_COLOR, "等待", 1, col, legend=col == 1)
        _fill(fig, runs_, POLICY_COLORS[policy], f"{POLICY_NAMES[policy]}：在批次里", 1, col)
        fig.add_scatter(x=firsts[0], y=firsts[1], mode="markers", marker=dict(color="#000", size=5),
                        name="首个 token", showlegend=col == 1, legendgroup="first", row=1, col=col,
                        hovertemplate="首个 token：%{x:.0f} ms<extra></extra>")
        fig.add_scatter(x=ends, y=[s.blocks_in_use for s in run.steps], mode="lines", line=dict(
            color=POLICY_COLORS[policy], shape="hv"), name=f"{POLICY_NAMES[policy]}：占用的块", row=2, col=1)
        fig.add_scatter(x=ends, y=[len(s.waiting) for s in run.steps], mode="lines", line=dict(
            color=POLICY_COLORS[policy], shape="hv"), name=f"{POLICY_NAMES[policy]}：等待的请求",
            showlegend=False, row=2, col=2)
        fig.update_yaxes(range=[len(run.outcomes) - 0.4, -0.6], showgrid=False, title="请求" if col == 1 else None,
                         row=1, col=col)
    for row, col in ((1, 1), (1, 2), (2, 1), (2, 2)):
        fig.update_xaxes(range=[0, end * 1.02], title=axis_title("时间", "ms") if row == 2 else None, row=row, col=col)
    fig.update_yaxes(title=axis_title("块", "块"), rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title=axis_title("请求", "个"), rangemode="tozero", row=2, col=2)
    apply_template(fig, f"同一组请求：静态批处理和连续批处理的时间线（{comparison.where}；每一步取各轮里最快的一次）", 700)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.15, x=0), margin=dict(b=150))
    return fig


# -- the cost of paging ------------------------------------------------------------------------------------------
def cost_figure(cost: "PagingCost") -> go.Figure:
    """Left: median decode step time against the length, per batch size, contiguous (solid) and paged (dashed).
    Right: the gather alone against the bytes it copies."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("一步解码的耗时（每轮取中位数，各轮取最快）", "单独测的收集（gather）耗时"))
    batches = sorted({c.batch for c in cost.cells})
    for k, B in enumerate(batches):
        cells = sorted((c for c in cost.cells if c.batch == B), key=lambda c: c.length)
        color = PALETTE[k % len(PALETTE)]
        x = [c.length for c in cells]
        fig.add_scatter(x=x, y=[c.best_contiguous_ms for c in cells], mode="lines+markers", name=f"B = {B}，连续",
                        line=dict(color=color), row=1, col=1)
        fig.add_scatter(x=x, y=[c.best_paged_ms for c in cells], mode="lines+markers", name=f"B = {B}，分页",
                        line=dict(color=color, dash="dash"), marker=dict(symbol="square"), row=1, col=1)
        fig.add_scatter(x=[c.gather_bytes / 2**20 for c in cells], y=[min(c.gather_ms) for c in cells],
                        mode="lines+markers", name=f"B = {B}，收集", line=dict(color=color, dash="dot"),
                        showlegend=False, row=1, col=2)
    fig.update_xaxes(title=axis_title("每条序列的长度", "token"), row=1, col=1)
    fig.update_yaxes(title=axis_title("单步耗时", "ms"), rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title=axis_title("每步收集的 K/V", "MiB"), row=1, col=2)
    fig.update_yaxes(title=axis_title("收集耗时", "ms"), rangemode="tozero", row=1, col=2)
    return apply_template(fig, f"分页的代价（每块 {cost.block_size} 个 token，{cost.where}）", 420, legend_below=True)
