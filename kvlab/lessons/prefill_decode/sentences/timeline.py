"""Chapter 3.3's claims about one generation: the p99 of the inter-token latency, prefill against feeding
the prompt token by token, the panel against the run above it, and a decode step against its two bounds."""
from __future__ import annotations

from ....claims import Chooser, Rule
from .common import P, SAME, close, RERUN_TIMELINE, RERUN_TIMELINE_EN


ITL_TAIL = Chooser(f"{P}.itl_tail", (
    Rule(f"{P}.itl_tail.few", ("n", "p99", "low", "high"), lambda v: v["n"] < 100 and v["low"] <= v["p99"] <= v["high"]),
    Rule(f"{P}.itl_tail.many", ("n", "p99"), lambda v: v["n"] >= 100),
    Rule(f"{P}.itl_tail.unmeasured", substantive=False),
))


def _parallel(share_max: float):
    """Prefill under ``share_max`` of P × the fastest decode step, the product (of the printed factors, to its
    rounding step) and the share as printed; the fastest step is the minimum of at least as many samples (``n``
    decode steps) as the TTFT's (``runs`` prefills), so the comparison, if anything, favours feeding the tokens one
    by one."""
    def holds(v) -> bool:
        seq = v["P"] * v["itl"]
        return (abs(v["sequential"] - seq) <= 0.005 + 1e-9 * seq
                and close(v["share"], 100 * v["ttft"] / v["sequential"], 1)
                and v["ttft"] < share_max * v["sequential"] and v["n"] >= v["runs"])
    return holds


PARALLEL_SHOWS = ("ttft", "P", "itl", "n", "sequential", "share", "runs")
PARALLEL = Chooser(f"{P}.parallel", (
    Rule(f"{P}.parallel.half", PARALLEL_SHOWS, _parallel(0.5)),
    Rule(f"{P}.parallel.faster", PARALLEL_SHOWS, _parallel(1.0)),
    Rule(f"{P}.parallel.unclear", ("ttft", "P", "itl", "n", "sequential"), substantive=False),
    Rule(f"{P}.parallel.unmeasured", substantive=False),
))


def _panel(agree: bool):
    def holds(v) -> bool:
        d1, d2 = v["ttft_diff"], v["tpot_diff"]
        ok = (close(d1, 100 * (v["ttft_panel"] / v["ttft_run"] - 1), 1)
              and close(d2, 100 * (v["tpot_panel"] / v["tpot_run"] - 1), 1))
        return ok and ((abs(d1) <= SAME and abs(d2) <= SAME) == agree)
    return holds


PANEL_SHOWS = ("n", "ttft_panel", "ttft_run", "ttft_diff", "tpot_panel", "tpot_run", "tpot_diff")

PANEL = Chooser(f"{P}.panel", (
    Rule(f"{P}.panel.same", PANEL_SHOWS, _panel(True)),
    Rule(f"{P}.panel.differs", PANEL_SHOWS, _panel(False)),
    Rule(f"{P}.panel.unmeasured", substantive=False),
))

STEP_BUDGET = Chooser(f"{P}.step_budget", (
    Rule(f"{P}.step_budget.overhead", ("measured", "bound", "ratio"),
         lambda v: v["ratio"] >= 3 and close(v["ratio"], v["measured"] * 1e3 / v["bound"], 1)),
    Rule(f"{P}.step_budget.near", ("measured", "bound", "ratio"),
         lambda v: v["ratio"] < 3 and close(v["ratio"], v["measured"] * 1e3 / v["bound"], 0.1)),
    Rule(f"{P}.step_budget.unmeasured", substantive=False),
))


TEMPLATES = {  # key -> its Chinese sentence (ZH, in __init__.py)
    f"{P}.itl_tail.few": "{n} 个解码步的 p99（{p99}）只由最大的两个样本决定（在 {low} 和 {high} 之间）：不到 100 个样本时，"
                         "它反映的是一两次卡顿，不是稳定的分位数。",
    f"{P}.itl_tail.many": "p99（{p99}）来自 {n} 个解码步，是一个有意义的分位数。",
    f"{P}.itl_tail.unmeasured": "这次没有可算分位数的解码步；" + RERUN_TIMELINE,
    f"{P}.parallel.half": "预填充 {ttft}；把 {P} 个 token 逐个送进去约需 {P} × {itl} = {sequential}（{itl} 是 {n} 个解码步里最快的"
                          "一步，TTFT 是 {runs} 次预填充里最快的一次：样本多的一边更容易碰上一次没被打断的，所以这样比较对"
                          "逐个送入有利）：即便如此，一次前向处理整段提示词，也只用了逐个送进去的 {share}。",
    f"{P}.parallel.faster": "预填充 {ttft}；把 {P} 个 token 逐个送进去约需 {P} × {itl} = {sequential}（{itl} 是 {n} 个解码步里最快"
                            "的一步）：一次前向还是更快（{share}），但这次没快到一半——TTFT 只取自 {runs} 次预填充，{n} 个解码步里"
                            "更容易碰上一步没被机器上别的程序打断的；" + RERUN_TIMELINE,
    f"{P}.parallel.unclear": "预填充 {ttft}；把 {P} 个 token 逐个送进去约需 {P} × {itl} = {sequential}（{itl} 是 {n} 个解码步里最快"
                             "的一步）：这次说不准，预填充没有比逐个送进去快，多半是那一刻机器上别的程序占用了处理器；"
                             + RERUN_TIMELINE,
    f"{P}.panel.same": "面板打开时（生成 {n} 个 token）为这句提示词重新计了时：TTFT {ttft_panel}，上面那次 {ttft_run}（{ttft_diff}）；"
                       "图上那一遍的 TPOT {tpot_panel}，上面那次图上那一遍 {tpot_run}（{tpot_diff}）。都在 ±15% 以内：两次测量一致。",
    f"{P}.panel.differs": "面板打开时（生成 {n} 个 token）为这句提示词重新计了时：TTFT {ttft_panel}，上面那次 {ttft_run}（{ttft_diff}）；"
                          "图上那一遍的 TPOT {tpot_panel}，上面那次图上那一遍 {tpot_run}（{tpot_diff}）。超出了 ±15%：同样的工作在"
                          "不同时刻量，机器的忙闲不同，数字就不同；两次里更快的那次更接近机器空闲时的速度。",
    f"{P}.parallel.unmeasured": "这次没有测出有效的预填充和解码时间，比不了一次前向和逐个送进去；" + RERUN_TIMELINE,
    f"{P}.panel.unmeasured": "面板这次没有可以和上面比的 TTFT/TPOT；把「生成的 token 数」拖到 2 以上再看。",
    f"{P}.step_budget.overhead": "实测一步解码（ITL 的中位数）{measured}，是两者中较长那个（{bound}）的 {ratio} 倍：这个模型太小，"
                                 "一次前向的时间绝大部分不是花在运算和读写本身，而是花在固定开销上（Python、逐个算子的调度；"
                                 "在 GPU 上还有每个内核的启动）。",
    f"{P}.step_budget.near": "实测一步解码（ITL 的中位数）{measured}，只是两者中较长那个（{bound}）的 {ratio} 倍：这台机器上，"
                             "连这么小的模型也接近两道屋顶。",
    f"{P}.step_budget.unmeasured": "这次没有测出一步解码的时间，比不了；" + RERUN_TIMELINE,
}

TEMPLATES_EN = {  # the same claims in English (EN, in __init__.py): the same keys, the same fields
    f"{P}.itl_tail.few": "The p99 of {n} decode steps ({p99}) is set by the two largest samples alone (between {low} and "
                         "{high}): with fewer than 100 samples it reflects a hiccup or two, not a stable percentile.",
    f"{P}.itl_tail.many": "The p99 ({p99}) comes from {n} decode steps: a meaningful percentile.",
    f"{P}.itl_tail.unmeasured": "This run has no decode steps to take a percentile of; " + RERUN_TIMELINE_EN,
    f"{P}.parallel.half": "Prefill took {ttft}; feeding the {P} tokens one by one would take about {P} × {itl} = "
                          "{sequential} ({itl} is the fastest of {n} decode steps, the TTFT the fastest of {runs} "
                          "prefills: the side with more samples is more likely to catch an uninterrupted one, so this "
                          "comparison favours feeding the tokens one by one). Even so, one forward pass over the whole "
                          "prompt took only {share} of the one-by-one time.",
    f"{P}.parallel.faster": "Prefill took {ttft}; feeding the {P} tokens one by one would take about {P} × {itl} = "
                            "{sequential} ({itl} is the fastest of {n} decode steps): one forward pass is still faster "
                            "({share}), but not twice as fast this time. The TTFT comes from only {runs} prefills, and "
                            "among {n} decode steps one is more likely to have run without other programs on the "
                            "machine interrupting it; " + RERUN_TIMELINE_EN,
    f"{P}.parallel.unclear": "Prefill took {ttft}; feeding the {P} tokens one by one would take about {P} × {itl} = "
                             "{sequential} ({itl} is the fastest of {n} decode steps): this run cannot tell, as prefill "
                             "was not faster than feeding them one by one, most likely because other programs had the "
                             "processor at that moment; " + RERUN_TIMELINE_EN,
    f"{P}.panel.same": "When the panel opened (generating {n} tokens), it timed this prompt again: TTFT {ttft_panel}, "
                       "against {ttft_run} in the run above ({ttft_diff}); the TPOT of the generation drawn {tpot_panel}, "
                       "against {tpot_run} for the one drawn above ({tpot_diff}). Both within ±15%: the two "
                       "measurements agree.",
    f"{P}.panel.differs": "When the panel opened (generating {n} tokens), it timed this prompt again: TTFT {ttft_panel}, "
                          "against {ttft_run} in the run above ({ttft_diff}); the TPOT of the generation drawn {tpot_panel}, "
                          "against {tpot_run} for the one drawn above ({tpot_diff}). Beyond ±15%: the same work "
                          "measured at different moments, with the machine more or less busy, gives different numbers; "
                          "the faster of the two is closer to the speed of an idle machine.",
    f"{P}.parallel.unmeasured": "This run measured no valid prefill and decode times, so it cannot compare one forward "
                                "pass with feeding the tokens one by one; " + RERUN_TIMELINE_EN,
    f"{P}.panel.unmeasured": "This time the panel has no TTFT/TPOT to compare with the run above; drag \"Tokens to "
                             "generate\" to 2 or more and look again.",
    f"{P}.step_budget.overhead": "The measured decode step (the median ITL) is {measured}, {ratio} times the longer of the "
                                 "two bounds ({bound}): this model is so small that most of a forward pass goes not into "
                                 "computing and moving data but into fixed overhead (Python, dispatching one operator "
                                 "at a time; on a GPU also launching every kernel).",
    f"{P}.step_budget.near": "The measured decode step (the median ITL) is {measured}, only {ratio} times the longer of "
                             "the two bounds ({bound}): on this machine even a model this small comes close to the two "
                             "roofs.",
    f"{P}.step_budget.unmeasured": "This run measured no decode step time, so there is nothing to compare; "
                                   + RERUN_TIMELINE_EN,
}

CHOOSERS = (ITL_TAIL, PARALLEL, PANEL, STEP_BUDGET)
