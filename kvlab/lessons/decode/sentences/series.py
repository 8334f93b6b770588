"""The run's totals, both modes' eighths (uncached, cached) and the counted crossover: their choosers and Chinese
sentences (``TEMPLATES``) and the same in English (``TEMPLATES_EN``)."""
from __future__ import annotations

from ....claims import Chooser, Rule
from .common import (_RERUN, _RERUN_EN, _level_but_one, _level_ends, _ratio_agrees, _rises_but_one, _rising,
                     _rough_one_dip, _rough_uneven, _share_agrees)


def _totals_agree(v) -> bool:
    return v["kv_s"] < v["none_s"] and v["speedup"] > 1 and _ratio_agrees(v["speedup"], v["none_s"], v["kv_s"])


def _estimates_agree(v) -> bool:
    return v["robust"] > 1 and _ratio_agrees(v["robust"], v["none_est"], v["kv_est"])


STALLED = 1.2  # a total this much above its estimate by medians was lengthened by stalls; ratios this far apart differ


def _counted(v) -> bool:
    """The printed ratio of the K/V projections counted for the timed run is theirs (whole numbers), and so is the
    printed ratio of the two generations' FLOPs (2 decimals)."""
    return (v["kv_kv"] > 0 and _ratio_agrees(v["counted"], v["none_kv"], v["kv_kv"], 0, 0)
            and _ratio_agrees(v["flops"], v["none_flop"], v["kv_flop"]))


# the run's length, its counted work (K/V projections from the trace, FLOPs of the whole generation) and totals
TIMED = ("n", "none_kv", "kv_kv", "counted", "none_flop", "kv_flop", "flops", "none_s", "kv_s")
TOTALS = Chooser("decode.totals", (
    Rule("decode.totals.faster", TIMED + ("speedup", "robust"),
         lambda v: _counted(v) and _totals_agree(v) and 1 / STALLED <= v["robust"] / v["speedup"] <= STALLED),
    Rule("decode.totals.kv_stalled", TIMED + ("speedup", "none_est", "kv_est", "robust"),
         lambda v: _counted(v) and _totals_agree(v) and _estimates_agree(v) and v["robust"] > STALLED * v["speedup"]
         and v["kv_s"] >= STALLED * v["kv_est"]),
    Rule("decode.totals.none_stalled", TIMED + ("speedup", "none_est", "kv_est", "robust"),
         lambda v: _counted(v) and _totals_agree(v) and _estimates_agree(v) and v["robust"] < v["speedup"] / STALLED
         and v["none_s"] >= STALLED * v["none_est"]),
    Rule("decode.totals.uncertain", TIMED, lambda v: _counted(v) and v["kv_s"] < v["none_s"], substantive=False),
    Rule("decode.totals.unclear", TIMED, _counted, substantive=False),
))

ROUGH = ("eighths", "t0", "t1", "median", "first", "last", "growth")  # a rough rise: eighths, ends, last / first
# one outlier read away: the eighths, the outlier, the other seven's ends and their t
OTHERS = ("eighths", "outlier", "rest_t0", "rest_t1", "rest_first", "rest_last")
UNCACHED = Chooser("decode.uncached", (
    Rule("decode.uncached.growth_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] >= 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.fixed_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] < 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.rises_rough", ROUGH + ("dip_from", "dip_to"), _rough_one_dip),
    Rule("decode.uncached.rises_uneven", ROUGH, _rough_uneven),
    Rule("decode.uncached.flat", ("eighths", "t0", "t1", "median"), _level_ends),
    Rule("decode.uncached.rises_outlier", OTHERS + ("median", "rest_share"), _rises_but_one),
    Rule("decode.uncached.flat_outlier", OTHERS + ("median",), _level_but_one),
    Rule("decode.uncached.noisy", ("eighths", "t0", "t1", "median"), substantive=False),
))

CROSSOVER = Chooser("decode.crossover", (
    Rule("decode.crossover.far", ("cross", "n"), lambda v: v["cross"] > 2 * v["n"]),
    Rule("decode.crossover.near", ("cross", "n"), lambda v: v["n"] < v["cross"] <= 2 * v["n"]),
    Rule("decode.crossover.passed", ("cross", "n"), lambda v: v["cross"] <= v["n"]),
))

CACHED = Chooser("decode.cached", (
    Rule("decode.cached.flat", ("eighths", "t0", "t1", "median"), _level_ends),
    Rule("decode.cached.grows", ("eighths", "t0", "t1", "share"), lambda v: _rising(v) and _share_agrees(v)),
    Rule("decode.cached.flat_outlier", OTHERS + ("median",), _level_but_one),
    Rule("decode.cached.grows_outlier", OTHERS + ("median", "rest_share"), _rises_but_one),
    Rule("decode.cached.noisy", ("eighths", "t0", "t1", "median"), substantive=False),
))

ROUGH_KEYS = ("decode.uncached.rises_rough", "decode.uncached.rises_uneven")  # rises, but by uneven steps
OUTLIER_KEYS = {"decode.uncached.rises_outlier", "decode.uncached.flat_outlier", "decode.cached.flat_outlier",
                "decode.cached.grows_outlier"}  # read without one eighth: what follows reads those seven too
GROWING = {"decode.uncached.growth_dominates", "decode.uncached.fixed_dominates", "decode.cached.grows",
           "decode.uncached.rises_rough", "decode.uncached.rises_uneven", "decode.uncached.rises_outlier",
           "decode.cached.grows_outlier"}

CHOOSERS = (TOTALS, UNCACHED, CROSSOVER, CACHED)

_TOTALS = ("两种方式生成了同样的 {n} 个新 token（按这次的 trace 数，每层无缓存共为 {none_kv} 个 token 投影 K/V，有缓存只"
           "投影 {kv_kv} 个，投影 K/V 的 token 数相差 {counted} 倍；按模型配置算，整次生成的浮点运算量无缓存 {none_flop}、"
           "有缓存 {kv_flop}，相差 {flops} 倍）：无缓存累计 {none_s}，有缓存 {kv_s}")
_STALLED = (_TOTALS + "，无缓存用时是有缓存的 {speedup} 倍。按各步耗时的中位数估算，无缓存约 {none_est}、有缓存约 {kv_est}，"
            "是 {robust} 倍：")
_EIGHTHS = "把各步按 t 分成八段（从 t = {t0} 附近到 t = {t1} 附近），每段单步耗时的中位数 {eighths}，全部步的中位数 {median}"
_OUTLIER = ("把各步按 t 分成八段，每段单步耗时的中位数 {eighths}，全部步的中位数 {median}。其中 {outlier} 那一段偏离了其余七段的走势，是一次计时"
            "波动；除去它，其余七段")
_REST_RISES = ("基本上一段比一段长：从 t = {rest_t0} 附近的 {rest_first} 涨到 t = {rest_t1} 附近的 {rest_last}，随 t 增长的"
               "部分在 t = {rest_t1} 附近约占单步的 {rest_share}。")
_REST_LEVEL = ("头尾（t = {rest_t0} 附近 {rest_first}，t = {rest_t1} 附近 {rest_last}）相差不到全部步中位数的一成，"
               "每一段离它也都不到三成，看不出随 t 的增长：")
TEMPLATES = {
    "decode.totals.faster": _TOTALS + "，无缓存用时是有缓存的 {speedup} 倍（按各步耗时的中位数估算是 {robust} 倍，两者相符）。",
    "decode.totals.kv_stalled": _STALLED + "有缓存那次的累计时间 {kv_s} 比按中位数估算的 {kv_est} 长出一截，"
                                "是被几次卡顿拖长的，按中位数算的倍数更可靠。",
    "decode.totals.none_stalled": _STALLED + "无缓存那次的累计时间 {none_s} 比按中位数估算的 {none_est} "
                                  "长出一截，是被几次卡顿拖长的，按中位数算的倍数更可靠。",
    "decode.totals.uncertain": _TOTALS + "；有缓存更快，但这一次说不准快多少：累计时间和各步耗时的中位数给出的倍数对不上，"
                               "多半是计时被别的程序打断了；" + _RERUN,
    "decode.totals.unclear": _TOTALS + "；这一次有缓存没有更快，多半是计时被别的程序打断了，" + _RERUN,
    "decode.uncached.growth_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                        "附近到 t = {t1} 附近）。多出的时间花在随 t 增长的投影、前馈网络和注意力上，按它们的 "
                                        "FLOP 数折算约 {rate}；在 t = {t1} 附近这部分占单步的 {share}，随 t 增长的部分占大头。",
    "decode.uncached.fixed_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                       "附近到 t = {t1} 附近）。多出的时间按随 t 增长的 FLOP 数折算约 {rate}；在 t = {t1} "
                                       "附近这部分只占单步的 {share}，固定开销仍占大头。",
    "decode.uncached.rises_rough": "无缓存：" + _EIGHTHS + "：从 {first} 涨到 {last}（×{growth}），单步耗时随 t 明显变长；"
                                   "{dip_from} → {dip_to} 一处回落是计时波动，所以下面的单步指数不作解读。",
    "decode.uncached.rises_uneven": "无缓存：" + _EIGHTHS + "：从 {first} 涨到 {last}（×{growth}），一段比一段长，单步耗时随 t "
                                    "明显变长；只是各段涨幅很不均匀（计时波动），所以下面的单步指数不作解读。",
    "decode.uncached.flat": "无缓存：" + _EIGHTHS + "；头尾两段相差不到全部步中位数的一成，每一段离它也都不到三成：在这么短的长度内看不出随 t 的增长："
                            "固定开销（例如在 GPU 上逐个启动 GPU 内核）盖过了随 t 增长的计算；把生成长度调大，才看得出增长从哪里开始。",
    "decode.uncached.rises_outlier": "无缓存：" + _OUTLIER + _REST_RISES,
    "decode.uncached.flat_outlier": "无缓存：" + _OUTLIER + _REST_LEVEL + "固定开销盖过了随 t 增长的计算；把生成长度调大，"
                                    "才看得出增长从哪里开始。",
    "decode.uncached.noisy": "无缓存：" + _EIGHTHS + "：这一次计时噪声太大（或长度太短），说不清随 t 增长了多少；把生成长度调大或"
                             + _RERUN,
    "decode.crossover.far": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，远超这次测量的最大长度 t = {n}。",
    "decode.crossover.near": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，已经接近这次测量的最大长度 t = {n}。",
    "decode.crossover.passed": "按 FLOP 数，t² 项在 t ≈ {cross} 追上线性项，这次测量（最大 t = {n}）已经越过了它。",
    "decode.cached.flat": "有缓存：" + _EIGHTHS + "；头尾两段相差不到全部步中位数的一成，每一段离它也都不到三成，看不出随 t 的增长：读缓存那一项在这么"
                          "短的长度内淹没在固定开销和计时噪声里。",
    "decode.cached.grows": "有缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} 附近到 "
                           "t = {t1} 附近）；随 t 增长的部分在 t = {t1} 附近约占单步的 {share}。",
    "decode.cached.flat_outlier": "有缓存：" + _OUTLIER + _REST_LEVEL + "读缓存那一项在这么短的长度内淹没在固定开销和计时"
                                  "噪声里。",
    "decode.cached.grows_outlier": "有缓存：" + _OUTLIER + _REST_RISES,
    "decode.cached.noisy": "有缓存：" + _EIGHTHS + "：这一次计时噪声太大，说不清随 t 增长了多少；" + _RERUN,
}

# -- the same claims in English (Catalog.of_topics reads TEMPLATES_EN): the same keys, the same fields --
_TOTALS_EN = ("Both ways generated the same {n} new tokens (counted in this run's trace, each layer projected K/V for "
              "{none_kv} tokens without a cache and for only {kv_kv} with one, a factor of {counted} in tokens "
              "projected; from the model's configuration, the whole generation takes {none_flop} without a cache and "
              "{kv_flop} with one, a factor of {flops}): {none_s} in total without a cache, {kv_s} with one")
_STALLED_EN = (_TOTALS_EN + "; without a cache it took {speedup} times as long. Estimated from the steps' median times, "
               "the uncached run takes about {none_est} and the cached one about {kv_est}, a factor of {robust}: ")
_EIGHTHS_EN = ("the median step time in each eighth of the steps by t (from about t = {t0} to about t = {t1}) is "
               "{eighths}, the median over all steps {median}")
_OUTLIER_EN = ("the median step time in each eighth of the steps by t is {eighths}, the median over all steps {median}. "
               "The eighth at {outlier} departs from the trend of the other seven, a timing blip; without it, the other "
               "seven ")
_REST_RISES_EN = ("mostly rise from one to the next: from {rest_first} near t = {rest_t0} to {rest_last} near "
                  "t = {rest_t1}, and near t = {rest_t1} the part that grows with t is about {rest_share} of a step.")
_REST_LEVEL_EN = ("have ends ({rest_first} near t = {rest_t0}, {rest_last} near t = {rest_t1}) less than a tenth of the "
                  "overall median apart, and none of them is as much as three tenths of it away from it: no growth "
                  "with t shows: ")
_FIXED_WINS_EN = ("the fixed cost outweighs the computation that grows with t; make the generation longer to see where "
                  "the growth begins.")
_LOST_EN = "at such short lengths the cache-read term is lost in the fixed cost and the timing noise."
_LEVEL_EN = ("; the first and the last eighth are less than a tenth of the overall median apart, and none is as much as "
             "three tenths of it away from it")
TEMPLATES_EN = {
    "decode.totals.faster": _TOTALS_EN + "; without a cache it took {speedup} times as long (estimated from the steps' "
                            "median times, {robust} times; the two agree).",
    "decode.totals.kv_stalled": _STALLED_EN + "the cached run's total, {kv_s}, is well above the {kv_est} its medians "
                                "give: a few stalls lengthened it, so the factor from the medians is the more reliable.",
    "decode.totals.none_stalled": _STALLED_EN + "the uncached run's total, {none_s}, is well above the {none_est} its "
                                  "medians give: a few stalls lengthened it, so the factor from the medians is the "
                                  "more reliable.",
    "decode.totals.uncertain": _TOTALS_EN + "; the cache is faster, but this run cannot say by how much: the factors from "
                               "the totals and from the steps' median times disagree, most likely because another "
                               "program interrupted the timing; " + _RERUN_EN,
    "decode.totals.unclear": _TOTALS_EN + "; this time the cache was not faster, most likely because another program "
                             "interrupted the timing; " + _RERUN_EN,
    "decode.uncached.growth_dominates": "No cache: the median step time of each eighth of the steps by t mostly rises "
                                        "from one eighth to the next: {eighths} (from about t = {t0} to about "
                                        "t = {t1}). The extra time goes to the projections, feed-forward network and "
                                        "attention that grow with t; counted by their FLOPs, that work runs at about "
                                        "{rate}; near t = {t1} it is {share} of a step: the part that grows with t "
                                        "dominates.",
    "decode.uncached.fixed_dominates": "No cache: the median step time of each eighth of the steps by t mostly rises "
                                       "from one eighth to the next: {eighths} (from about t = {t0} to about "
                                       "t = {t1}). Counted by the FLOPs that grow with t, the extra time runs at about "
                                       "{rate}; near t = {t1} it is only {share} of a step: the fixed cost still "
                                       "dominates.",
    "decode.uncached.rises_rough": "No cache: " + _EIGHTHS_EN + ": from {first} to {last} (×{growth}), the step time "
                                   "clearly grows with t; the one fall, {dip_from} → {dip_to}, is a timing blip, so "
                                   "the step exponent below is not read.",
    "decode.uncached.rises_uneven": "No cache: " + _EIGHTHS_EN + ": from {first} to {last} (×{growth}), each eighth "
                                    "longer than the one before, the step time clearly grows with t; but by very "
                                    "uneven steps (timing noise), so the step exponent below is not read.",
    "decode.uncached.flat": "No cache: " + _EIGHTHS_EN + _LEVEL_EN + ": at such short lengths no growth with t shows: "
                            "the fixed cost (on a GPU, for example, launching GPU kernels one by one) outweighs the "
                            "computation that grows with t; make the generation longer to see where the growth begins.",
    "decode.uncached.rises_outlier": "No cache: " + _OUTLIER_EN + _REST_RISES_EN,
    "decode.uncached.flat_outlier": "No cache: " + _OUTLIER_EN + _REST_LEVEL_EN + _FIXED_WINS_EN,
    "decode.uncached.noisy": "No cache: " + _EIGHTHS_EN + ": this run's timing is too noisy (or the run too short) to "
                             "tell how much the step time grows with t; make the generation longer, or " + _RERUN_EN,
    "decode.crossover.far": "Counting FLOPs, the t² term catches up with the linear terms only at t ≈ {cross}, far "
                            "beyond this run's longest length, t = {n}.",
    "decode.crossover.near": "Counting FLOPs, the t² term catches up with the linear terms only at t ≈ {cross}, already "
                             "close to this run's longest length, t = {n}.",
    "decode.crossover.passed": "Counting FLOPs, the t² term catches up with the linear terms at t ≈ {cross}; this run "
                               "(up to t = {n}) has gone past it.",
    "decode.cached.flat": "With a cache: " + _EIGHTHS_EN + _LEVEL_EN + "; no growth with t shows: " + _LOST_EN,
    "decode.cached.grows": "With a cache: the median step time of each eighth of the steps by t mostly rises from one "
                           "eighth to the next: {eighths} (from about t = {t0} to about t = {t1}); near t = {t1} the "
                           "part that grows with t is about {share} of a step.",
    "decode.cached.flat_outlier": "With a cache: " + _OUTLIER_EN + _REST_LEVEL_EN + _LOST_EN,
    "decode.cached.grows_outlier": "With a cache: " + _OUTLIER_EN + _REST_RISES_EN,
    "decode.cached.noisy": "With a cache: " + _EIGHTHS_EN + ": this run's timing is too noisy to tell how much the step "
                           "time grows with t; " + _RERUN_EN,
}
