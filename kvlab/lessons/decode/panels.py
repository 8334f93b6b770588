"""Chapter 3.1's panels: the walkthrough (play / step slider, layer and head menus; top-k bars, the two
attention pictures and the cache's K/V rows of one step) and the latency panel (length and repeats, measured on a
click, refused before it runs when its uncached work passes :data:`LATENCY_MAX_WORK`). Each control's label is one
constant, used by the control and by its check."""
from __future__ import annotations

import html
from functools import partial

from ..._validate import positive_int
from ...measure import device_label
from ...model import ToyTransformer
from ...inputs import InputError, whole_number
from ...viz import decode_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, dropdown, int_slider, play_slider, run_button
from .timings import measure_decode_latency
from .walkthrough import DecodeStep, most_attended


STEP_LABEL, LAYER_LABEL, HEAD_LABEL = "解码步", "层", "注意力头"  # the walkthrough's controls, as shown


def render_step(steps: list[DecodeStep], step, layer, head) -> View:
    """The walkthrough panel: top-k bars, the two attention pictures, and the cache's K/V rows of one step."""
    s = steps[whole_number(STEP_LABEL, step, 1, len(steps)) - 1]
    layer = whole_number(LAYER_LABEL, layer, 0, s.full_weights.shape[0] - 1)
    head = whole_number(HEAD_LABEL, head, 0, s.full_weights.shape[1] - 1)
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
    looks = "；".join(f"第 {h} 头最关注第 {i + 1} 个 token「{html.escape(tok)}」（权重 {w:.2f}）"
                     for h in [head, *mates] for i, tok, w in [most_attended(s, layer, h)])
    if n == s.t:
        work = (f"预填充：缓存还是空的，两边都为全部 <b>{n}</b> 个 token 计算 K/V、算 {n}×{n} 的分数；"
                f"有缓存时这 {n} 行 K/V 同时写入缓存")
    else:
        work = (f"无缓存：为 <b>{s.kv_without_cache}</b> 个 token 计算 K/V，每层每头 {s.t}×{s.t} = "
                f"<b>{s.t * s.t}</b> 个分数<br>有缓存：只为 <b>{n}</b> 个 token 计算 K/V，每层每头 {n}×{s.t} = "
                f"<b>{n * s.t}</b> 个分数；其余 {s.t - n} 个 token 的 K/V 从缓存读取")
    readout = (
        f"<b>第 {s.step} 步</b>　输入 t = {s.t} 个 token：{html.escape(' '.join(s.tokens))}　→　"
        f"预测「{html.escape(s.next_token)}」（概率 {s.topk[0][1]:.1%}）<br>{work}<br>"
        f"第 {layer} 层第 {head} 头：有缓存算出的这一行与完整矩阵最后一行的最大差异 <b>{diff:.1e}</b><br>"
        f"KV 组 {group}（第 {group * n_rep}–{(group + 1) * n_rep - 1} 头共用同一份 K/V）：{looks}"
    )
    return View(figures, readout, s)


def walkthrough_panel(model: ToyTransformer, steps: list[DecodeStep]) -> Panel:
    """Play / step slider, layer and head menus wired to :func:`render_step`."""
    cfg = model.config
    play, step_slider = play_slider(STEP_LABEL, 1, 1, len(steps))
    heads = [(f"{h}（KV 组 {h // cfg.n_rep}）", h) for h in range(cfg.n_head)]
    return Panel({"step": step_slider, "layer": dropdown(LAYER_LABEL, list(range(cfg.n_layer)), 0, width="120px"),
                  "head": dropdown(HEAD_LABEL, heads, 0, width="200px")},
                 partial(render_step, steps), static=("step",), in_browser="step",
                 options=PanelOptions(extra=[play], layout="horizontal", css_class="kvlab-walkthrough"))


NEW_TOKENS_LABEL, REPEATS_LABEL = "生成 token 数", "重复次数（取中位数）"  # the latency panel's controls, as shown


LATENCY_MAX_WORK = 300_000  # token positions one click may feed the model without a cache (about 50 s on 2 cores)


def latency_work(new_tokens: int, repeats: int, prompt_len: int = 4) -> int:
    """Token positions the uncached runs of one click feed the model (a warm-up and ``repeats`` runs): without a
    cache, the pass that makes token t re-reads all t tokens, so one run costs the sum of t over its passes. The
    cached runs feed one token a pass and are left out (at most a few per cent as much)."""
    per_run = sum(range(prompt_len, prompt_len + positive_int("new_tokens", new_tokens)))
    return (positive_int("repeats", repeats) + 1) * per_run


def render_latency(model: ToyTransformer, new_tokens, repeats, progress: bool = True) -> View:
    """The latency panel: measure both ways, plot per-step and cumulative time with fitted exponents. The work is
    counted first: a setting past LATENCY_MAX_WORK is refused with the count (in Chinese) before anything runs,
    instead of blocking the kernel for minutes; the measurement itself stays interruptible (the stop button)."""
    new_tokens = whole_number(NEW_TOKENS_LABEL, new_tokens, 1, model.config.max_seq_len - 8)
    repeats = whole_number(REPEATS_LABEL, repeats, 1, 9)
    work = latency_work(new_tokens, repeats)
    if work > LATENCY_MAX_WORK:
        raise InputError(NEW_TOKENS_LABEL, f"与「{REPEATS_LABEL}」合起来，无缓存时要重算约 {work:,} 个 token 位置（每一步都重算"
                         f"前面的全部 token，热身 1 次加重复 {repeats} 次），是一次点击上限 {LATENCY_MAX_WORK:,} 的 "
                         f"{work / LATENCY_MAX_WORK:.1f} 倍（在 2 核 CPU 上要好几分钟）：请减少生成 token 数或重复次数")
    results = measure_decode_latency(model, new_tokens, repeats, progress=progress)
    none, kv = results["none"], results["kv"]
    total_none, total_kv = none.cumulative_seconds[-1], kv.cumulative_seconds[-1]
    readout = (
        f"生成 {new_tokens} 个 token：无缓存累计 <b>{total_none:.2f} s</b>，有缓存累计 <b>{total_kv:.2f} s</b>，"
        f"无缓存用时是有缓存的 <b>{total_none / total_kv:.1f}</b> 倍<br>"
        f"单步耗时增长指数（后半段拟合）：无缓存 {none.step_exponent:.2f}，有缓存 {kv.step_exponent:.2f}"
        f"（是否可读见下方说明）；"
        f"累计耗时增长指数：无缓存 {none.cumulative_exponent:.2f}，有缓存 {kv.cumulative_exponent:.2f}"
        f"（{device_label(model.device)}）"
    )
    return View([plots.latency_figure(results)], readout, results)


def latency_panel(model: ToyTransformer, new_tokens: int = 192) -> Panel:
    """Length and repeat sliders; measurements run when the button is clicked. The first one runs while the cell
    does, without a progress bar (it would stay in the saved output at 0 %); a click's shows one."""
    rendered = []

    def render(new_tokens, repeats) -> View:
        view = render_latency(model, new_tokens, repeats, progress=bool(rendered))
        rendered.append(True)
        return view

    return Panel({"new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 32, model.config.max_seq_len - 8, step=32),
                  "repeats": int_slider(REPEATS_LABEL, 1, 1, 5, width="300px")},
                 render, options=PanelOptions(layout="horizontal", css_class="kvlab-latency", button=run_button()))
