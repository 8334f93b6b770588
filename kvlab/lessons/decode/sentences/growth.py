"""Why the timed ratio is below the FLOPs' (the fixed cost), the slider's right end extrapolated, the long cached
run's growth and the rerun against the latency panel: their choosers and Chinese sentences (``TEMPLATES``), and the same in English (``TEMPLATES_EN``)."""
from __future__ import annotations

from ....claims import Chooser, Rule
from .common import _RERUN, _RERUN_EN, _change_agrees, _ratio_range, _share_agrees


def _extrapolates_both(v) -> bool:
    return v["rate"] > 0 and v["slope"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]


def _extrapolates_kv_flat(v) -> bool:
    return (v["rate"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]
            and 0.9 <= v["kv_s"] * 1e3 / (v["median"] * v["top"]) <= 1.1)


EXTRAPOLATION = Chooser("decode.extrapolation", (
    Rule("decode.extrapolation.both", ("rate", "slope", "top", "none_min", "kv_s"), _extrapolates_both),
    Rule("decode.extrapolation.kv_flat", ("rate", "top", "none_min", "median", "kv_s"), _extrapolates_kv_flat),
    # the same, from a rate the uncached eighths gave rising unevenly (ROUGH_KEYS): said to be rough
    Rule("decode.extrapolation.both_rough", ("rate", "slope", "top", "none_min", "kv_s"), _extrapolates_both),
    Rule("decode.extrapolation.kv_flat_rough", ("rate", "top", "none_min", "median", "kv_s"), _extrapolates_kv_flat),
    Rule("decode.extrapolation.none", ("top",), substantive=False),
))

def _fixed_cost(v) -> bool:
    """Timed ratio below the FLOPs' ratio; the cached generation's GFLOP at the measured rate is ``compute`` ms, its
    mean per pass ``per_step`` ms, below the median step; ``share`` is (median - per_step) / median; all as printed."""
    lo, hi = _ratio_range(v["kv_flop"], v["rate"], 0.005, 0.05)
    per_lo, per_hi = (v["compute"] - 0.005) / v["passes"], (v["compute"] + 0.005) / v["passes"]
    share_lo = 100 * (1 - (v["per_step"] + 0.0005) / (v["median"] - 0.005))
    share_hi = 100 * (1 - (v["per_step"] - 0.0005) / (v["median"] + 0.005))
    return (0 < v["speedup"] < v["flops"] and v["kv_flop"] > 0 and v["passes"] > 0
            and 1e3 * lo - 0.005 <= v["compute"] <= 1e3 * hi + 0.005
            and per_lo - 0.0005 <= v["per_step"] <= per_hi + 0.0005 and 0 < v["per_step"] < v["median"]
            and share_lo - 0.5 <= v["share"] <= share_hi + 0.5)


# why the timed ratio is far below the FLOPs': the cached steps' FLOPs at the rate measured without a cache, against
# the measured median step (what is left is the fixed cost a cache does not save)
FIXED = ("speedup", "flops", "kv_flop", "rate", "compute", "passes", "per_step", "median", "share")
FIXED_COST = Chooser("decode.fixed_cost", (
    Rule("decode.fixed_cost.share", FIXED, _fixed_cost),
    Rule("decode.fixed_cost.share_rough", FIXED, _fixed_cost),  # the rate from eighths that rose unevenly
    Rule("decode.fixed_cost.unclear", ("flops",), substantive=False),
))


GROWTH_RULES = {"large": lambda s: s >= 55, "half": lambda s: 45 <= s < 55, "notable": lambda s: 20 <= s < 45,
                "small": lambda s: s < 20}


def _growth_holds(size: str):
    def holds(v) -> bool:
        measured = (v["last"] - v["first"]) / (v["t1"] - v["t0"]) * 1e3  # µs/token between the two ends
        return (v["slope"] > 0 and v["last"] > 1.05 * v["first"] and 0.5 <= v["slope"] / measured <= 2
                and _share_agrees(v) and GROWTH_RULES[size](v["share"]) and v["rate"] > 0)
    return holds


GROWTH = Chooser("decode.growth", (
    *(Rule(f"decode.growth.{size}", ("t0", "t1", "first", "last", "slope", "share", "per_token", "rate"),
           _growth_holds(size)) for size in GROWTH_RULES),
    Rule("decode.growth.flat", ("t0", "t1", "first", "last"), lambda v: abs(v["last"] - v["first"]) <= 0.05 * v["first"]),
    Rule("decode.growth.noisy", ("t0", "t1", "first", "last"), substantive=False),
))

SAME_STEPS = 0.15  # two measurements of the same steps this close (as a share of the earlier one) agree
COMPARED = ("lo", "hi", "here", "there", "diff")  # the lengths both runs took, each run's median step there, |here - there|
RERUN = Chooser("decode.rerun", (
    Rule("decode.rerun.same", COMPARED,
         lambda v: v["lo"] < v["hi"] and v["diff"] <= 100 * SAME_STEPS and _change_agrees(v["diff"], v["here"], v["there"])),
    Rule("decode.rerun.slower", COMPARED,
         lambda v: v["lo"] < v["hi"] and v["here"] > v["there"] and v["diff"] > 100 * SAME_STEPS
         and _change_agrees(v["diff"], v["here"], v["there"])),
    Rule("decode.rerun.faster", COMPARED,
         lambda v: v["lo"] < v["hi"] and v["here"] < v["there"] and v["diff"] > 100 * SAME_STEPS
         and _change_agrees(v["diff"], v["here"], v["there"])),
    Rule("decode.rerun.unclear", ("lo", "hi"), substantive=False),
))

CHOOSERS = (FIXED_COST, EXTRAPOLATION, GROWTH, RERUN)

_GROWTH_ZH = ("有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 涨到 {last}，拟合斜率 {slope}：缓存里每多一个 "
              "token，每一步就多花这么多时间。从 t = {t0} 到 {t1} 多出的这部分，占 t = {t1} 附近实测单步中位数 {last} 的 {share}，"
              "{size}。每多一个 token 要多读 "
              "{per_token} 的 K/V；若把这部分时间全算作读缓存，等效读取速度约 {rate}，其中还包括和这些 K/V 做注意力的计算，"
              "所以真正的读取速度只会更快。")
_FIXED_SHARE = ("为什么用时只差 {speedup} 倍，浮点运算量却差 {flops} 倍？有缓存整次生成 {kv_flop}，按无缓存时随 t "
                "增长的部分测得的 {rate} 算只需约 {compute}，{passes} 次前向计算平均每次 {per_step}；可实测的单步中位数是 "
                "{median}：约 {share} 不是算术本身的时间，主要是与 t 无关的固定开销（逐个执行小运算、把权重读一遍），"
                "缓存省不掉它；还有一小部分是读缓存（下一小节测它随 t 的斜率）。")
_BOTH = ("按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}，有缓存每步的耗时随 t 增长约 {slope}），"
         "把滑块拉到最右（{top} 个 token），无缓存一次约需 {none_min}，有缓存约 {kv_s}。")
_KV_FLAT = ("按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}），把滑块拉到最右（{top} 个 token），"
            "无缓存一次约需 {none_min}；有缓存这次没测出随 t 的增长，按单步中位数 {median} 算约 "
            "{kv_s}（读缓存那一项没算进去，实际会更长，长多少见下面一小节测出的斜率）。")
_ROUGH_RATE = "各段涨幅不均匀，这个速率只是粗估，由它算出的占比也是。"
_ROUGH_EXTRAPOLATION = "各段涨幅不均匀，这个速率和外推只是粗估。"
TEMPLATES = {
    "decode.fixed_cost.share": _FIXED_SHARE,
    "decode.fixed_cost.share_rough": _FIXED_SHARE + _ROUGH_RATE,
    "decode.fixed_cost.unclear": "整次生成的浮点运算量差 {flops} 倍，用时的倍数为什么和它不同，这一次的计时拆不清（没测出"
                                 "无缓存随 t 增长的运算速度，或数字对不上），就不拆分了。",
    "decode.extrapolation.both": _BOTH,
    "decode.extrapolation.kv_flat": _KV_FLAT,
    "decode.extrapolation.both_rough": _BOTH + _ROUGH_EXTRAPOLATION,
    "decode.extrapolation.kv_flat_rough": _KV_FLAT + _ROUGH_EXTRAPOLATION,
    "decode.extrapolation.none": "这一次说不清无缓存的单步耗时随 t 怎样增长，就不按它外推到滑块最右（{top} 个 token）；"
                                 "把生成长度调大或" + _RERUN,
    **{f"decode.growth.{size}": _GROWTH_ZH.replace("{size}", word)
       for size, word in (("large", "占了大头"), ("half", "约占一半"), ("notable", "已经不小"), ("small", "还不大"))},
    "decode.growth.flat": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，几乎不变：读缓存那一项"
                          "淹没在固定开销里（在 GPU 上，时间主要花在逐个启动 GPU 内核上，常常就是这样）。",
    "decode.growth.noisy": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，这一次没有测出清楚的"
                           "增长，计时噪声盖过了它；重跑这一格，或者把这一格里的 new_tokens=1024 改大（最多约 2000）再试。",
    "decode.rerun.same": "同样是 t = {lo} 到 {hi} 的这些步，这一格单步耗时的中位数 {here}，上面面板那次（有缓存）{there}，"
                         "相差 {diff}，两次测量对得上。",
    "decode.rerun.slower": "同样是 t = {lo} 到 {hi} 的这些步，这一格单步耗时的中位数 {here}，比上面面板那次（有缓存）的 {there} "
                           "慢 {diff}：同样长度的一步不会自己变慢，多半是两次之间机器的忙闲变了。比较两次测量时，看相对的量"
                           "（多出的部分占单步的比例）比看绝对的耗时或斜率可靠：机器忙闲一变，两者一起按比例变。",
    "decode.rerun.faster": "同样是 t = {lo} 到 {hi} 的这些步，这一格单步耗时的中位数 {here}，比上面面板那次（有缓存）的 {there} "
                           "快 {diff}：同样长度的一步不会自己变快，多半是两次之间机器的忙闲变了。比较两次测量时，看相对的量"
                           "（多出的部分占单步的比例）比看绝对的耗时或斜率可靠：机器忙闲一变，两者一起按比例变。",
    "decode.rerun.unclear": "这一格和上面面板那次（有缓存）在 t = {lo} 到 {hi} 之间的单步耗时这一次比不清；" + _RERUN,
}
WORDS = {"min": "分钟"}

# -- the same claims in English (Catalog.of_topics reads TEMPLATES_EN and WORDS_EN): the same keys, the same fields --
_GROWTH_EN = ("With a cache, t from about {t0} to about {t1}: the median step time rises from {first} to {last}, a "
              "fitted slope of {slope}: each extra token in the cache adds that much to every step. The extra time "
              "from t = {t0} to {t1} is {share} of the median step measured near t = {t1}, {last}: {size}. Each extra "
              "token means reading {per_token} more of K/V; counting all of this time as cache reads gives an "
              "effective read rate of about {rate}, which also includes the attention computed with those K/V, so the "
              "true read rate can only be higher.")
_FIXED_SHARE_EN = ("Why is the time only {speedup} times as long when the FLOPs are {flops} times as many? The whole "
                   "cached generation is {kv_flop}; at the {rate} measured for the uncached work that grows with t, "
                   "that takes only about {compute}, {per_step} per forward pass on average over {passes} passes; yet "
                   "the measured median step is {median}: about {share} of it is not the arithmetic itself but mostly "
                   "a fixed cost independent of t (executing small operations one by one, reading the weights once), "
                   "which a cache cannot save; a small part is reading the cache (the next subsection measures its "
                   "slope in t).")
_BOTH_EN = ("Extrapolating from the growth measured this time (the uncached work that grows with t runs at about "
            "{rate}; the cached step time grows by about {slope}), with the slider at its right end ({top} tokens) one "
            "uncached generation would take about {none_min}, a cached one about {kv_s}.")
_KV_FLAT_EN = ("Extrapolating from the growth measured this time (the uncached work that grows with t runs at about "
               "{rate}), with the slider at its right end ({top} tokens) one uncached generation would take about "
               "{none_min}; the cached steps showed no growth with t this time, so at the median step, {median}, a "
               "cached one takes about {kv_s} (without the cache-read term, so really longer; the slope measured in "
               "the next subsection says by how much).")
_ROUGH_RATE_EN = " The eighths rose unevenly, so this rate is only a rough estimate, and so is the share from it."
_ROUGH_EXTRAPOLATION_EN = " The eighths rose unevenly, so this rate and the extrapolation are only rough estimates."
_SAME_STEPS_EN = "For the same steps, t = {lo} to {hi}, this cell's median step time"
_RELATIVE_EN = ("a step of the same length does not get {how} by itself, so most likely the machine's load changed "
                "between the two. To compare two measurements, relative quantities (the extra part's share of a step) "
                "are more reliable than absolute times or slopes: when the load changes, both scale together.")
TEMPLATES_EN = {
    "decode.fixed_cost.share": _FIXED_SHARE_EN,
    "decode.fixed_cost.share_rough": _FIXED_SHARE_EN + _ROUGH_RATE_EN,
    "decode.fixed_cost.unclear": "The whole generation's FLOPs differ by a factor of {flops}; why the timed factor "
                                 "differs from it cannot be untangled from this run's timing (no rate was measured for "
                                 "the uncached work that grows with t, or the numbers disagree), so it is not broken "
                                 "down.",
    "decode.extrapolation.both": _BOTH_EN,
    "decode.extrapolation.kv_flat": _KV_FLAT_EN,
    "decode.extrapolation.both_rough": _BOTH_EN + _ROUGH_EXTRAPOLATION_EN,
    "decode.extrapolation.kv_flat_rough": _KV_FLAT_EN + _ROUGH_EXTRAPOLATION_EN,
    "decode.extrapolation.none": "This run cannot tell how the uncached step time grows with t, so it is not "
                                 "extrapolated to the slider's right end ({top} tokens); make the generation longer, "
                                 "or " + _RERUN_EN,
    **{f"decode.growth.{size}": _GROWTH_EN.replace("{size}", word)
       for size, word in (("large", "most of it"), ("half", "about half"), ("notable", "no longer small"),
                          ("small", "still small"))},
    "decode.growth.flat": "With a cache, t from about {t0} to about {t1}: the median step time goes from {first} to "
                          "{last}, almost unchanged: the cache-read term is lost in the fixed cost (on a GPU, where "
                          "the time goes mostly to launching GPU kernels one by one, this is common).",
    "decode.growth.noisy": "With a cache, t from about {t0} to about {t1}: the median step time goes from {first} to "
                           "{last}; this run measured no clear growth, timing noise drowned it; rerun this cell, or "
                           "raise new_tokens=1024 in it (up to about 2000) and try again.",
    "decode.rerun.same": _SAME_STEPS_EN + " is {here} and the panel's run above (with a cache) {there}, {diff} apart: "
                         "the two measurements agree.",
    "decode.rerun.slower": _SAME_STEPS_EN + ", {here}, is {diff} slower than the panel's run above (with a cache), "
                           "{there}: " + _RELATIVE_EN.replace("{how}", "slower"),
    "decode.rerun.faster": _SAME_STEPS_EN + ", {here}, is {diff} faster than the panel's run above (with a cache), "
                           "{there}: " + _RELATIVE_EN.replace("{how}", "faster"),
    "decode.rerun.unclear": "This time, this cell's step times between t = {lo} and {hi} cannot be compared with the "
                            "panel's run above (with a cache); " + _RERUN_EN,
}
WORDS_EN = {"min": "min"}
