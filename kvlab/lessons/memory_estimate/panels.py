"""Chapter 3.4's panels: the calculator (model, S on a log slider linked to a box that takes any length, batch,
cache dtype, the models on the curves) and the budget (model, dtypes, a GPU that fills the memory box, the usable
share, S and B; a clear message, naming the control to change, when the weights alone do not fit). Each control's
label is one constant, used by the control and by its check."""
from __future__ import annotations

from ... import inputs
from ...memory import DTYPE_BITS
from ...presets import GPU_PRESETS, MODEL_PRESETS
from ...viz import memory_estimate_plots as plots
from ...viz.widgets import Panel, PanelOptions, View, dropdown, float_box, int_box, multi_select, selection_slider
from .calculator import cache_curves, calculator_html, estimate_cache
from .common import (BATCH_LABEL, BUDGET_LABEL, CACHE_DTYPE_LABEL, CHAPTER_MODEL, CHAPTER_S, CURVE_LABEL, CURVE_MODELS,
                    CUSTOM_GPU, DEFAULT_USABLE, GPU_LABEL, MAX_BATCH, MAX_BUDGET_MIB, MAX_SEQ_LEN, MIB, MODEL_LABEL,
                    SEQ_LABEL, SEQ_OPTIONS, SEQ_SLIDER_LABEL, USABLE_LABEL, WEIGHT_DTYPE_LABEL, label, model_options,
                    shown)
from .phrases import TEXTS
from .fit import context_curve, fit_html, gpu_for_budget, plan_fit, weights_do_not_fit


def curve_choice(curve_models) -> tuple[str, ...]:
    """The models picked for the curve plot, checked (none picked is allowed: the selected model is drawn)."""
    if isinstance(curve_models, str) or not isinstance(curve_models, (list, tuple)):
        raise inputs.InputError(label(CURVE_LABEL), TEXTS.say("need_models", got=repr(curve_models)))
    return tuple(inputs.choice(label(CURVE_LABEL), m, list(MODEL_PRESETS)) for m in curve_models)


def render_calculator(model, seq_len, batch_size, dtype, curve_models=CURVE_MODELS) -> View:
    """Control values -> readout (formula, per token, per layer, total, flags) and two figures."""
    name = inputs.choice(label(MODEL_LABEL), model, list(MODEL_PRESETS))
    S = inputs.whole_number(label(SEQ_LABEL), seq_len, 1, MAX_SEQ_LEN)
    B = inputs.whole_number(label(BATCH_LABEL), batch_size, 1, MAX_BATCH)
    dt = inputs.choice(label(CACHE_DTYPE_LABEL), dtype, list(DTYPE_BITS))
    chosen = curve_choice(curve_models)
    e = estimate_cache(name, S, B, dt)
    # the picks in preset order, then the selected model if it is not one of them: a model keeps its colour and
    # dash whichever model is selected and in whatever order the picks were clicked
    names = [n for n in MODEL_PRESETS if n in chosen] + ([] if name in chosen else [name])
    weights = (TEXTS.say("calc.weights_assumed" if e.model.hypothetical else "calc.weights", model=shown(e.model)),
               e.model.weight_bytes("fp16"))
    curves = plots.cache_curves_figure(cache_curves(names, B, dt), name, S, e.total_bytes, B, dt, weights)
    windowed = [e.model.layer_is_windowed(i) for i in range(e.model.n_layer)]
    layers = plots.layer_bytes_figure(shown(e.model), e.layer_bytes, windowed, S)
    return View([curves, layers], calculator_html(e), result=e)


def seq_len_slider(value: int = CHAPTER_S):
    """Sequence length on a log scale (powers of 2 and the 3·2^k between them), 1 .. 4,194,304 tokens. It has no
    readout of its own: it writes into the 「序列长度 S」 box, which also takes any typed length."""
    start = max(s for s in SEQ_OPTIONS if s <= value)
    slider = selection_slider(label(SEQ_SLIDER_LABEL), [(f"{s:,}", s) for s in SEQ_OPTIONS], start, width="430px",
                              continuous=False, readout=False)
    slider.add_class("kvlab-control-seq_slider")
    return slider


def link_slider_to_box(slider, box) -> None:
    """Moving the slider writes its length into the box; typing a length the slider has moves the slider."""
    def slid(change):
        box.value = change["new"]

    def typed(change):
        if change["new"] in SEQ_OPTIONS and slider.value != change["new"]:
            slider.value = change["new"]

    slider.observe(slid, names="value")
    box.observe(typed, names="value")


def curve_selector(chosen=CURVE_MODELS):
    return multi_select(label(CURVE_LABEL), model_options(), chosen, rows=9)


def calculator_panel(model: str = CHAPTER_MODEL, seq_len: int = CHAPTER_S, batch_size: int = 1,
                     dtype: str = "fp16", curve_models=CURVE_MODELS) -> Panel:
    """The calculator: model, S (log slider or typed exactly), batch, cache dtype, and the models on the curves
    (Ctrl/Shift-click to pick several)."""
    slider = seq_len_slider(seq_len)
    box = int_box(label(SEQ_LABEL), seq_len, width="190px")
    link_slider_to_box(slider, box)
    controls = {"model": dropdown(label(MODEL_LABEL), model_options(), model, width="400px"),
                "seq_len": box,
                "batch_size": int_box(label(BATCH_LABEL), batch_size, width="160px"),
                "dtype": dropdown(label(CACHE_DTYPE_LABEL), list(DTYPE_BITS), dtype, width="200px"),
                "curve_models": curve_selector(curve_models)}
    return Panel(controls, render_calculator, static=("model", "seq_len"), in_browser="seq_len",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-calc", extra={"seq_len": slider}))


def share_or(control: str, share: float, plan) -> str:
    """The control to blame when the weights do not fit: the usable share when it is below the default and the
    default share would hold them (``plan(share) -> FitPlan``), else ``control`` (the card's memory)."""
    if share < DEFAULT_USABLE and plan(DEFAULT_USABLE).weights_fit:
        return label(USABLE_LABEL)
    return control


def render_fit(model, weight_dtype, cache_dtype, gpu, budget_mib, usable, seq_len, batch_size) -> View:
    """Control values -> the card as a bar, and weights + cache as the context grows (where the cache passes the
    weights, where the usable memory runs out); a clear message if the weights alone do not fit."""
    name = inputs.choice(label(MODEL_LABEL), model, list(MODEL_PRESETS))
    wd = inputs.choice(label(WEIGHT_DTYPE_LABEL), weight_dtype, list(DTYPE_BITS))
    cd = inputs.choice(label(CACHE_DTYPE_LABEL), cache_dtype, list(DTYPE_BITS))
    inputs.choice(label(GPU_LABEL), gpu, [*GPU_PRESETS, CUSTOM_GPU])
    mib = inputs.whole_number(label(BUDGET_LABEL), budget_mib, 1, MAX_BUDGET_MIB)
    share = inputs.positive_number(label(USABLE_LABEL), usable, 1)
    S = inputs.whole_number(label(SEQ_LABEL), seq_len, 1, MAX_SEQ_LEN)
    B = inputs.whole_number(label(BATCH_LABEL), batch_size, 1, MAX_BATCH)
    plan = plan_fit(name, mib * MIB, S, B, wd, cd, share)
    if not plan.weights_fit:
        raise inputs.InputError(share_or(label(BUDGET_LABEL), share, lambda u: plan_fit(name, mib * MIB, S, B, wd, cd, u)),
                                weights_do_not_fit(plan))
    figures = [plots.fit_bar_figure(plan, gpu_for_budget(gpu, mib)),
               plots.fit_context_figure(plan, context_curve(plan), shown(plan.model))]
    return View(figures, fit_html(plan), result=plan)


def fit_panel(model: str = CHAPTER_MODEL, gpu: str = "T4 16 GB (Colab)", seq_len: int = CHAPTER_S,
              batch_size: int = 1, weight_dtype: str = "fp16", cache_dtype: str = "fp16",
              usable: float = float(DEFAULT_USABLE)) -> Panel:
    """The budget panel. Choosing a GPU writes its memory (as nvidia-smi reports it) into the total box, which
    can then be edited freely; the usable share (default 0.9) is what weights and cache may take of it."""
    budget = int_box(label(BUDGET_LABEL), GPU_PRESETS[gpu].memory_mib, width="210px")
    gpu_box = dropdown(label(GPU_LABEL), [*((g, g) for g in GPU_PRESETS), (TEXTS.say("custom_gpu"), CUSTOM_GPU)], gpu,
                       width="230px")

    def card_chosen(change):
        if change["new"] in GPU_PRESETS:
            budget.value = GPU_PRESETS[change["new"]].memory_mib

    gpu_box.observe(card_chosen, names="value")
    share = float_box(label(USABLE_LABEL), usable, step=0.05)
    controls = {"model": dropdown(label(MODEL_LABEL), model_options(), model, width="400px"),
                "weight_dtype": dropdown(label(WEIGHT_DTYPE_LABEL), list(DTYPE_BITS), weight_dtype, width="200px"),
                "cache_dtype": dropdown(label(CACHE_DTYPE_LABEL), list(DTYPE_BITS), cache_dtype, width="200px"),
                "gpu": gpu_box, "budget_mib": budget, "usable": share,
                "seq_len": int_box(label(SEQ_LABEL), seq_len, width="200px"),
                "batch_size": int_box(label(BATCH_LABEL), batch_size, width="160px")}
    return Panel(controls, render_fit, static=("model", "weight_dtype", "cache_dtype"),  # not gpu: choosing a card
                 options=PanelOptions(layout="horizontal", css_class="kvlab-fit",  # also fills the budget box
                                      more=("weight_dtype", "cache_dtype", "budget_mib", "usable", "batch_size")))
