"""Plot builders of chapter 3.6 (the paged cache, shared prefixes, continuous batching): results in, figures out."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..paging import block_fill, blocks_for
from ..phrases import Phrasebook
from ..stats import cumulative
from .storage_plots import EMPTY, TAIL, _rects, owner_color
from .style import PALETTE, apply_template, axis_title

if TYPE_CHECKING:  # the lesson's result types (the lesson imports this module)
    from ..lessons.paged.batching import BatchingComparison
    from ..lessons.paged.cost import PagingCost
    from ..lessons.paged.runs import WasteTimeline
    from ..paging import SharedPrefix
    from ..serving import ServeRun, StepRecord

# Every title, axis, legend entry and hover text of these figures, looked up when a figure is built (a notebook sets
# the language after importing kvlab). Keys ending in ``_one`` are the singular a count of 1 takes in English.
PLOTS = Phrasebook("paged.plots", {
    "zh": {
        "scheme.padding": "填充到最长（3.2）",
        "scheme.reservation": "按固定长度预留（3.5）",
        "scheme.paging": "分页",
        "policy.static": "静态批处理",
        "policy.continuous": "连续批处理",
        # the block-table animation
        "pool_title": "块池：{blocks} 块，每块 {block_size} 个 token（{used} 块在用）",
        "tables_title": "每个请求的块表（格子里是物理块号）",
        "block_hover": "块 {block}：请求 {rid} 的第 {index} 块，{used}/{block_size} 个 token",
        "request": "请求 {rid}",
        "empty_slots": "块里还空着的位置",
        "free_block": "空闲块",
        "next_free": "下一个分出去的空闲块",
        "table_position": "块表里的位置（第几块）",
        "frame_title": "第 {step} 步（共 {steps} 步）：{status}",
        "frame_status": "{running} 个请求在批次里，等待中：{waiting}，空闲块 {free} 个",
        "waiting_sep": "、",
        "nobody": "无",
        "arrives_at": "第 {step} 步到达",
        "finished_at": "第 {step} 步已结束",
        "preempted_waiting": "被抢占，等待",
        "waiting": "等待",
        "table_hover": "请求 {rid}：{tokens} 个 token，块 {blocks}",
        "tokens": "{tokens} 个 token",
        "tokens_one": "{tokens} 个 token",
        # waste of three schemes
        "waste_slots_title": "同一批在跑的请求，三种存法占的 token 槽位",
        "waste_share_title": "整段运行里空着的槽位比例",
        "tokens_held": "真正存着的 token",
        "bar_hover": "%{{x}}：%{{y:.1f}}%<extra></extra>",
        "step": "步",
        "slots": "槽位",
        "unit_tokens": "token",
        "empty_share": "空着的比例",
        "waste_title": "浪费：每块 {block_size} 个 token 的分页，对比每条预留 {reserve} 个 token",
        "waste_cut": "（{cut} 个请求比预留长）",
        "waste_cut_one": "（{cut} 个请求比预留长）",
        # shared prefixes
        "sharing_blocks_title": "{requests} 个请求的块（每块 {block_size} 个 token）",
        "sharing_blocks_title_one": "{requests} 个请求的块（每块 {block_size} 个 token）",
        "sharing_curve_title": "请求越多，共享省下的越多",
        "shared_whole": "共享的整块（只存 1 份，引用计数 {refs}）",
        "own_blocks": "各自的块",
        "copied_blocks": "写时复制出的块（共享的半满块，第一次写入前先复制一份）",
        "prefix_line": "共享的前 {tokens} 个 token 到这里",
        "prefix_line_one": "共享的前 {tokens} 个 token 到这里",
        "unshared": "不共享",
        "shared_prefix": "共享前缀",
        "requests": "请求数",
        "blocks_in_use": "占用的块",
        "blocks_in_use_axis": "占用的块（块）",
        "sharing_title": "共享前缀：{unshared} 块 → {shared} 块，省下 {saved} 块",
        "sharing_copies": "，写时复制 {copies} 次",
        "sharing_copies_one": "，写时复制 {copies} 次",
        "sharing_no_copy": "，不需要写时复制（前缀恰好是整块）",
        "sharing_nothing_whole": "，不需要写时复制（前缀恰好是整块）",
        # static against continuous batching
        "waiting_requests": "等待的请求",
        "in_batch": "{policy}：在批次里",
        "first_token": "首个 token",
        "first_token_hover": "首个 token：%{{x:.0f}} ms<extra></extra>",
        "policy_blocks": "{policy}：占用的块",
        "policy_waiting": "{policy}：等待的请求",
        "request_axis": "请求",
        "time": "时间",
        "blocks_axis": "块（块）",
        "requests_axis": "请求（个）",
        "timeline_title": "同一组请求：静态批处理和连续批处理的时间线（{where}；每一步取各轮里最快的一次）",
        # the cost of paging
        "step_time_title": "一步解码的耗时（每轮取中位数，各轮取最快）",
        "gather_title": "单独测的收集（gather）耗时",
        "contiguous_line": "B = {batch}，连续",
        "paged_line": "B = {batch}，分页",
        "gather_line": "B = {batch}，收集",
        "sequence_length": "每条序列的长度",
        "step_time": "单步耗时",
        "gathered": "每步收集的 K/V",
        "gather_time": "收集耗时",
        "cost_title": "分页的代价（每块 {block_size} 个 token，{where}）",
    },
    "en": {
        "scheme.padding": "Padding to the longest (3.2)",
        "scheme.reservation": "Fixed-length reservation (3.5)",
        "scheme.paging": "Paging",
        "policy.static": "Static batching",
        "policy.continuous": "Continuous batching",
        "pool_title": "Block pool: {blocks} blocks of {block_size} tokens ({used} in use)",
        "tables_title": "Each request's block table (cells hold physical block ids)",
        "block_hover": "Block {block}: block {index} of request {rid}, {used}/{block_size} tokens",
        "request": "Request {rid}",
        "empty_slots": "Empty slots in a block",
        "free_block": "Free block",
        "next_free": "Next free block handed out",
        "table_position": "Position in the block table (logical block)",
        "frame_title": "Step {step} of {steps} (counting from 0): {status}",
        "frame_status": "in the batch: {running} requests; waiting: {waiting}; free blocks: {free}",
        "waiting_sep": ", ",
        "nobody": "none",
        "arrives_at": "arrives at step {step}",
        "finished_at": "finished at step {step}",
        "preempted_waiting": "preempted, waiting",
        "waiting": "waiting",
        "table_hover": "Request {rid}: {tokens} tokens, blocks {blocks}",
        "tokens": "{tokens} tokens",
        "tokens_one": "{tokens} token",
        "waste_slots_title": "Token slots held for the same running requests, three ways",
        "waste_share_title": "Share of slots left empty over the whole run",
        "tokens_held": "Tokens actually held",
        "bar_hover": "%{{x}}: %{{y:.1f}}%<extra></extra>",
        "step": "Step",
        "slots": "Slots",
        "unit_tokens": "tokens",
        "empty_share": "Empty share",
        "waste_title": "Waste: paging in blocks of {block_size} tokens against reserving {reserve} tokens per request",
        "waste_cut": " ({cut} requests outgrow the reservation)",
        "waste_cut_one": " ({cut} request outgrows the reservation)",
        "sharing_blocks_title": "Blocks of {requests} requests ({block_size} tokens per block)",
        "sharing_blocks_title_one": "Blocks of {requests} request ({block_size} tokens per block)",
        "sharing_curve_title": "The more requests, the more sharing saves",
        "shared_whole": "Shared whole blocks (stored once, reference count {refs})",
        "own_blocks": "Each request's own blocks",
        "copied_blocks": "Copy-on-write copies (of the shared part-filled block, made before the first write)",
        "prefix_line": "The shared first {tokens} tokens end here",
        "prefix_line_one": "The shared first {tokens} token ends here",
        "unshared": "Without sharing",
        "shared_prefix": "Shared prefix",
        "requests": "Requests",
        "blocks_in_use": "Blocks in use",
        "blocks_in_use_axis": "Blocks in use",
        "sharing_title": "Shared prefix: {unshared} blocks → {shared} blocks, {saved} saved",
        "sharing_copies": ", {copies} copy-on-write copies",
        "sharing_copies_one": ", {copies} copy-on-write copy",
        "sharing_no_copy": ", no copy-on-write needed (the prefix is whole blocks)",
        "sharing_nothing_whole": ", nothing shared (the prefix fills no whole block)",
        "waiting_requests": "Waiting requests",
        "in_batch": "{policy}: in the batch",
        "first_token": "First token",
        "first_token_hover": "First token: %{{x:.0f}} ms<extra></extra>",
        "policy_blocks": "{policy}: blocks in use",
        "policy_waiting": "{policy}: waiting requests",
        "request_axis": "Request",
        "time": "Time",
        "blocks_axis": "Blocks",
        "requests_axis": "Requests",
        "timeline_title": "The same requests under static and continuous batching ({where}; each step at its fastest "
                          "round)",
        "step_time_title": "Time of one decode step (median of each round, fastest round)",
        "gather_title": "The gather (copy) alone, timed",
        "contiguous_line": "B = {batch}, contiguous",
        "paged_line": "B = {batch}, paged",
        "gather_line": "B = {batch}, gather",
        "sequence_length": "Sequence length",
        "step_time": "Step time",
        "gathered": "K/V gathered per step",
        "gather_time": "Gather time",
        "cost_title": "The cost of paging ({block_size} tokens per block, {where})",
    },
})
say = PLOTS.say


def counted(key: str, n: int, **fields) -> str:
    """``key``'s phrase for the count ``n`` (``key + "_one"`` when ``n`` is 1: English's singular)."""
    return say(f"{key}_one" if n == 1 else key, **fields)


class ShownNames(Mapping):
    """``SCHEME_NAMES[key]``: the name of a scheme (or policy) in the course's language when it is asked for (a dict
    built at import would keep the names of the language before the notebook set its own)."""

    def __init__(self, prefix: str, keys: tuple[str, ...]):
        self.prefix, self.keys_ = prefix, keys

    def __getitem__(self, key: str) -> str:
        if key not in self.keys_:
            raise KeyError(key)
        return say(f"{self.prefix}.{key}")

    def __iter__(self):
        return iter(self.keys_)

    def __len__(self) -> int:
        return len(self.keys_)

    def __repr__(self) -> str:
        return f"ShownNames({dict(self)!r})"


SCHEME_NAMES = ShownNames("scheme", ("padding", "reservation", "paging"))
SCHEME_COLORS = {"padding": "#D55E00", "reservation": "#CC79A7", "paging": PALETTE[0]}
POLICY_NAMES = ShownNames("policy", ("static", "continuous"))
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
                        subplot_titles=(say("pool_title", blocks=n_blocks, block_size=bs, used=frame.blocks_in_use),
                                        say("tables_title")))
    rows = math.ceil(n_blocks / POOL_COLUMNS)
    for rid in rids:
        mine = [(b, i, used) for b, (owner, i, used) in state.items() if owner == rid]
        if not mine:
            continue
        used_boxes = [(c + 0.05, c + 0.05 + 0.9 * used / bs, r + 0.1, r + 0.9) for b, _, used in mine
                      for r, c in [divmod(b, POOL_COLUMNS)]]
        hover = "<br>".join(say("block_hover", block=b, rid=rid, index=i, used=used, block_size=bs)
                            for b, i, used in mine)
        _fill(fig, used_boxes, owner_color(rid), say("request", rid=rid), 1, 1, hover=hover, group=f"r{rid}")
    tails = [(c + 0.05 + 0.9 * used / bs, c + 0.95, r + 0.1, r + 0.9) for b, (_, _, used) in state.items()
             if used < bs for r, c in [divmod(b, POOL_COLUMNS)]]
    if tails:
        _fill(fig, tails, TAIL, say("empty_slots"), 1, 1)
    free = [(c + 0.05, c + 0.95, r + 0.1, r + 0.9) for b in frame.free for r, c in [divmod(b, POOL_COLUMNS)]]
    if free:
        _fill(fig, free, EMPTY, say("free_block"), 1, 1)
    if frame.free:
        r, c = divmod(frame.free[0], POOL_COLUMNS)
        xs, ys = _rects([(c + 0.02, c + 0.98, r + 0.05, r + 0.95)])
        fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color=NEXT_COLOR, width=2, dash="dot"),
                        name=say("next_free"), row=1, col=1, hoverinfo="skip")
    fig.add_scatter(x=[b % POOL_COLUMNS + 0.5 for b in range(n_blocks)],
                    y=[b // POOL_COLUMNS + 0.5 for b in range(n_blocks)], mode="text",
                    text=[str(b) for b in range(n_blocks)], textfont=dict(size=12, color="#222"), showlegend=False,
                    hoverinfo="skip", row=1, col=1)
    _tables(fig, run, frame, widest)
    fig.update_xaxes(visible=False, range=[-0.1, POOL_COLUMNS + 0.1], row=1, col=1)
    fig.update_yaxes(visible=False, range=[rows + 0.1, -0.1], row=1, col=1)
    fig.update_xaxes(range=[-0.6, widest + 2.2], tickvals=list(range(widest)), title=say("table_position"),
                     row=1, col=2)
    fig.update_yaxes(range=[len(rids) - 0.4, -0.6], tickvals=list(range(len(rids))),
                     ticktext=[say("request", rid=rid) for rid in rids], showgrid=False, row=1, col=2)
    title = say("frame_title", step=frame.step, steps=run.steps[-1].step + 1, status=_frame_status(frame))
    return apply_template(fig, title, 430, legend_below=True)


def _frame_status(frame: "StepRecord") -> str:
    waiting = say("waiting_sep").join(str(r) for r in frame.waiting) or say("nobody")
    return say("frame_status", running=len(frame.running), waiting=waiting, free=len(frame.free))


def request_status(run: "ServeRun", frame: "StepRecord", rid: int) -> str:
    """A request that is not in the batch after ``frame``: not arrived, waiting (or preempted), finished."""
    outcome = next(o for o in run.outcomes if o.request.rid == rid)
    if outcome.request.arrival > frame.step:
        return say("arrives_at", step=outcome.request.arrival)
    if outcome.finished <= frame.step:
        return say("finished_at", step=outcome.finished)
    return say("preempted_waiting") if rid in frame.preempted else say("waiting")


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
        _fill(fig, boxes, owner_color(rid), say("request", rid=rid), 1, 2, legend=False, group=f"r{rid}",
              hover=say("table_hover", rid=rid, tokens=frame.lengths[rid], blocks=blocks))
        xs += list(range(len(blocks))) + [widest + 1.1]
        ys += [y] * (len(blocks) + 1)
        texts += [str(b) for b in blocks] + [counted("tokens", frame.lengths[rid], tokens=frame.lengths[rid])]
    fig.add_scatter(x=xs, y=ys, mode="text", text=texts, textfont=dict(size=12, color="#111"), showlegend=False,
                    hoverinfo="skip", row=1, col=2)


# -- waste of three schemes --------------------------------------------------------------------------------
def waste_figure(timeline: "WasteTimeline") -> go.Figure:
    """Left: slots each scheme holds at every step of the run, and the tokens in them. Right: the share of the
    slot-steps that hold no token, per scheme."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.64, 0.36], horizontal_spacing=0.1,
                        subplot_titles=(say("waste_slots_title"), say("waste_share_title")))
    for scheme, name in SCHEME_NAMES.items():
        fig.add_scatter(x=timeline.steps, y=timeline.slots[scheme], mode="lines", name=name,
                        line=dict(color=SCHEME_COLORS[scheme], width=2, shape="hv"), row=1, col=1)
    fig.add_scatter(x=timeline.steps, y=timeline.used, mode="lines", name=say("tokens_held"), fill="tozeroy",
                    line=dict(color="#777", width=1, shape="hv"), fillcolor="rgba(120,120,120,0.25)", row=1, col=1)
    shares = [timeline.waste_share(s) for s in SCHEME_NAMES]
    fig.add_bar(x=list(SCHEME_NAMES.values()), y=[100 * s for s in shares], marker_color=list(SCHEME_COLORS.values()),
                text=[f"{100 * s:.1f}%" for s in shares], textposition="outside", showlegend=False, row=1, col=2,
                hovertemplate=say("bar_hover"))
    fig.update_xaxes(title=say("step"), row=1, col=1)
    fig.update_yaxes(title=axis_title(say("slots"), say("unit_tokens")), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=axis_title(say("empty_share"), "%"), range=[0, 110], row=1, col=2)
    title = (say("waste_title", block_size=timeline.block_size, reserve=timeline.reserve)
             + (counted("waste_cut", timeline.cut, cut=timeline.cut) if timeline.cut else ""))
    return apply_template(fig, title, 420, legend_below=True)


# -- shared prefixes --------------------------------------------------------------------------------------------
def sharing_figure(shared: "SharedPrefix", counts: list[int], with_sharing: list[int], without: list[int]
                   ) -> go.Figure:
    """Left: each request's blocks (the prefix's whole blocks held once, the part-filled one copied on the first
    write). Right: blocks against the number of requests, with and without sharing."""
    bs, p, R = shared.block_size, shared.prefix, len(shared.lengths)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.1,
                        subplot_titles=(counted("sharing_blocks_title", R, requests=R, block_size=bs),
                                        say("sharing_curve_title")))
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
        _fill(fig, shared_boxes, SHARED_COLOR, say("shared_whole", refs=R), 1, 1)
    if own:
        _fill(fig, own, PALETTE[0], say("own_blocks"), 1, 1)
    if copies:
        _fill(fig, copies, PALETTE[5], say("copied_blocks"), 1, 1, line=COPY_COLOR)
    if tails:
        _fill(fig, tails, TAIL, say("empty_slots"), 1, 1)
    if p:
        fig.add_scatter(x=[p / bs] * 2, y=[-0.1, R + 0.1], mode="lines", line=dict(color="#333", dash="dash"),
                        name=counted("prefix_line", p, tokens=p), row=1, col=1, hoverinfo="skip")
    fig.add_scatter(x=counts, y=without, mode="lines+markers", name=say("unshared"), line=dict(color="#D55E00"),
                    row=1, col=2)
    fig.add_scatter(x=counts, y=with_sharing, mode="lines+markers", name=say("shared_prefix"),
                    line=dict(color=PALETTE[0]), row=1, col=2)
    widest = max(blocks_for(n, bs) for n in shared.lengths)
    fig.update_xaxes(title=say("table_position"), range=[-0.1, widest + 0.1], dtick=1, row=1, col=1)
    fig.update_yaxes(range=[R + 0.1, -0.1], tickvals=[y + 0.5 for y in range(R)],
                     ticktext=[say("request", rid=y) for y in range(R)], showgrid=False, row=1, col=1)
    fig.update_xaxes(title=say("requests"), row=1, col=2)
    fig.update_yaxes(title=say("blocks_in_use_axis"), rangemode="tozero", row=1, col=2)
    title = (say("sharing_title", unshared=shared.unshared, shared=shared.shared, saved=shared.saved)
             + (counted("sharing_copies", shared.copies, copies=shared.copies) if shared.copies
                else say("sharing_no_copy") if full else say("sharing_nothing_whole")))
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
                        subplot_titles=[POLICY_NAMES["static"], POLICY_NAMES["continuous"], say("blocks_in_use"),
                                        say("waiting_requests")])
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
        name = POLICY_NAMES[policy]
        _fill(fig, waits, WAIT_COLOR, say("waiting"), 1, col, legend=col == 1)
        _fill(fig, runs_, POLICY_COLORS[policy], say("in_batch", policy=name), 1, col)
        fig.add_scatter(x=firsts[0], y=firsts[1], mode="markers", marker=dict(color="#000", size=5),
                        name=say("first_token"), showlegend=col == 1, legendgroup="first", row=1, col=col,
                        hovertemplate=say("first_token_hover"))
        fig.add_scatter(x=ends, y=[s.blocks_in_use for s in run.steps], mode="lines", line=dict(
            color=POLICY_COLORS[policy], shape="hv"), name=say("policy_blocks", policy=name), row=2, col=1)
        fig.add_scatter(x=ends, y=[len(s.waiting) for s in run.steps], mode="lines", line=dict(
            color=POLICY_COLORS[policy], shape="hv"), name=say("policy_waiting", policy=name),
            showlegend=False, row=2, col=2)
        fig.update_yaxes(range=[len(run.outcomes) - 0.4, -0.6], showgrid=False,
                         title=say("request_axis") if col == 1 else None, row=1, col=col)
    for row, col in ((1, 1), (1, 2), (2, 1), (2, 2)):
        fig.update_xaxes(range=[0, end * 1.02], title=axis_title(say("time"), "ms") if row == 2 else None,
                         row=row, col=col)
    fig.update_yaxes(title=say("blocks_axis"), rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title=say("requests_axis"), rangemode="tozero", row=2, col=2)
    apply_template(fig, say("timeline_title", where=comparison.where), 700)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.15, x=0), margin=dict(b=150))
    return fig


# -- the cost of paging ------------------------------------------------------------------------------------------
def cost_figure(cost: "PagingCost") -> go.Figure:
    """Left: median decode step time against the length, per batch size, contiguous (solid) and paged (dashed).
    Right: the gather alone against the bytes it copies."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=(say("step_time_title"), say("gather_title")))
    batches = sorted({c.batch for c in cost.cells})
    for k, B in enumerate(batches):
        cells = sorted((c for c in cost.cells if c.batch == B), key=lambda c: c.length)
        color = PALETTE[k % len(PALETTE)]
        x = [c.length for c in cells]
        fig.add_scatter(x=x, y=[c.best_contiguous_ms for c in cells], mode="lines+markers", name=say("contiguous_line", batch=B),
                        line=dict(color=color), row=1, col=1)
        fig.add_scatter(x=x, y=[c.best_paged_ms for c in cells], mode="lines+markers", name=say("paged_line", batch=B),
                        line=dict(color=color, dash="dash"), marker=dict(symbol="square"), row=1, col=1)
        fig.add_scatter(x=[c.gather_bytes / 2**20 for c in cells], y=[min(c.gather_ms) for c in cells],
                        mode="lines+markers", name=say("gather_line", batch=B), line=dict(color=color, dash="dot"),
                        showlegend=False, row=1, col=2)
    fig.update_xaxes(title=axis_title(say("sequence_length"), say("unit_tokens")), row=1, col=1)
    fig.update_yaxes(title=axis_title(say("step_time"), "ms"), rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title=axis_title(say("gathered"), "MiB"), row=1, col=2)
    fig.update_yaxes(title=axis_title(say("gather_time"), "ms"), rangemode="tozero", row=1, col=2)
    return apply_template(fig, say("cost_title", block_size=cost.block_size, where=cost.where), 420,
                          legend_below=True)
