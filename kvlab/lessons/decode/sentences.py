"""What chapter 3.1's timed runs say, as claims (:mod:`kvlab.claims`): the choosers (:data:`CHOOSERS`, a
predicate per key over the very numbers its sentence prints: measured medians, never a fit's intercept as a time;
shares and ratios of them; extrapolations only from a growth this run measured), the Chinese catalog :data:`ZH`,
:func:`show_claims`, and :func:`explain_latency` / :func:`explain_growth`, which turn a run into claims."""
from __future__ import annotations

import math

from ...claims import DIFFERENCE, Catalog, Chooser, Claim, Number, Rule, number, ratio, series, show
from ...measure import DecodeTiming
from ...stats import median
from ...memory import format_bytes, kv_bytes_per_token
from ...model import ToyTransformer
from .timings import StepEnds, StepFit, crossover_length, step_ends, timing_ends, uncached_flops


def _ms(x: float) -> Number:
    return number(x, 2, "ms")


def _count(x: float) -> Number:
    return number(x, 0)


def _pct(share: float) -> Number:
    return number(100 * share, 0, "%")


RISING_DIP, RISING_JUMP = 0.1, 0.5  # of the whole rise: the most one eighth may fall, and rise, from the one before


def _rising(v) -> bool:
    """The eighths' medians rise from first to last at every point (what 「基本上一段比一段长」 allows): none falls
    below the one before by more than RISING_DIP of the whole rise, none jumps by more than RISING_JUMP of it (load
    that slowed one stretch is not a growth with t)."""
    e = v["eighths"]
    rise = e[-1] - e[0]
    steps = [later - earlier for earlier, later in zip(e, e[1:])]
    return rise > 0 and all(-RISING_DIP * rise <= step <= RISING_JUMP * rise for step in steps)


def _share_agrees(v) -> bool:
    """The printed share is (last - first) / last of the printed first and last medians, within their rounding."""
    first, last = (v["eighths"][0], v["eighths"][-1]) if "eighths" in v else (v["first"], v["last"])
    return abs(v["share"] - 100 * (last - first) / last) <= 1 + 2 / last


def _ends_numbers(ends: StepEnds) -> dict[str, Number]:
    return {"t0": _count(ends.t0), "first": _ms(ends.first_ms), "t1": _count(ends.t1), "last": _ms(ends.last_ms),
            "median": _ms(ends.median_ms), "eighths": series(ends.eighths_ms, 2, "ms"), "share": _pct(ends.share)}


TOTALS = Chooser("decode.totals", (
    Rule("decode.totals.faster", ("n", "none_s", "kv_s", "speedup"),
         lambda v: v["kv_s"] < v["none_s"] and v["speedup"] > 1),
    Rule("decode.totals.unclear", ("n", "none_s", "kv_s"), substantive=False),
))

UNCACHED = Chooser("decode.uncached", (
    Rule("decode.uncached.growth_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] >= 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.fixed_dominates", ("eighths", "t0", "t1", "rate", "share"),
         lambda v: _rising(v) and v["share"] < 50 and v["rate"] > 0 and _share_agrees(v)),
    Rule("decode.uncached.flat", ("median", "t0", "first", "t1", "last"),
         lambda v: abs(v["last"] - v["first"]) <= 0.1 * v["median"]),
    Rule("decode.uncached.noisy", ("t0", "first", "t1", "last", "median"), substantive=False),
))

CROSSOVER = Chooser("decode.crossover", (
    Rule("decode.crossover.far", ("cross", "n"), lambda v: v["cross"] > 2 * v["n"]),
    Rule("decode.crossover.near", ("cross", "n"), lambda v: v["n"] < v["cross"] <= 2 * v["n"]),
    Rule("decode.crossover.passed", ("cross", "n"), lambda v: v["cross"] <= v["n"]),
))

def _exponent_holds(low: float, high: float):
    """The fitted exponent within [low, high), and the second half's measured medians agreeing: about level for an
    exponent near 0 (within the rise t^0.3 allows over a doubling of t), rising for a larger one."""
    def holds(v) -> bool:
        level = 0.8 * v["from"] <= v["to"] <= 1.25 * v["from"]
        return low <= v["k"] < high and (level if high <= 0.3 else v["to"] > v["from"])
    return holds


# Said instead of the exponent's reading when the mode's growth sentence above says otherwise: no exponent reading
# beside a "can't tell", only "level" beside "level"; and "t² shows" only where the counted crossover is near.
STEP_UNREAD = Chooser("decode.exponent_unread", (Rule("decode.exponent_unread.noisy", ("k",), substantive=False),))
STEP_STEEP = Chooser("decode.exponent_steep", (
    Rule("decode.exponent_steep.not_t2", ("k", "from", "to"), lambda v: v["k"] >= 1.15 and v["to"] > v["from"]),
))

STEP_EXPONENT = Chooser("decode.step_exponent", (
    Rule("decode.step_exponent.flat", ("k", "from", "to"), _exponent_holds(-0.3, 0.3)),
    Rule("decode.step_exponent.mixed", ("k", "from", "to"), _exponent_holds(0.3, 0.85)),
    Rule("decode.step_exponent.linear", ("k", "from", "to"), _exponent_holds(0.85, 1.15)),
    Rule("decode.step_exponent.between", ("k", "from", "to"), _exponent_holds(1.15, 1.85)),
    Rule("decode.step_exponent.quadratic", ("k", "from", "to"), _exponent_holds(1.85, 2.3)),
    Rule("decode.step_exponent.noisy", ("k",), substantive=False),
    Rule("decode.step_exponent.unfit", substantive=False),
))

CUMULATIVE = Chooser("decode.cumulative", (
    Rule("decode.cumulative.early_slow", ("k", "early", "late"),
         lambda v: v["k"] < 0.85 and v["early"] >= 1.5 * v["late"]),
    Rule("decode.cumulative.linear", ("k",), lambda v: 0.85 <= v["k"] < 1.15),
    Rule("decode.cumulative.between", ("k", "late", "early"), lambda v: 1.15 <= v["k"] < 1.85 and v["late"] > v["early"]),
    Rule("decode.cumulative.quadratic", ("k", "late", "early"), lambda v: 1.85 <= v["k"] < 2.3 and v["late"] > v["early"]),
    Rule("decode.cumulative.noisy", ("k",), substantive=False),
    Rule("decode.cumulative.unfit", substantive=False),
))

CACHED = Chooser("decode.cached", (
    Rule("decode.cached.flat", ("median", "t0", "first", "t1", "last"),
         lambda v: abs(v["last"] - v["first"]) <= 0.1 * v["median"]),
    Rule("decode.cached.grows", ("eighths", "t0", "t1", "share"), lambda v: _rising(v) and _share_agrees(v)),
    Rule("decode.cached.noisy", ("median", "t0", "first", "t1", "last"), substantive=False),
))

EXTRAPOLATION = Chooser("decode.extrapolation", (
    Rule("decode.extrapolation.both", ("rate", "slope", "top", "none_min", "kv_s"),
         lambda v: v["rate"] > 0 and v["slope"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]),
    Rule("decode.extrapolation.kv_flat", ("rate", "top", "none_min", "median", "kv_s"),
         lambda v: v["rate"] > 0 and v["kv_s"] > 0 and v["none_min"] * 60 > v["kv_s"]
         and 0.9 <= v["kv_s"] * 1e3 / (v["median"] * v["top"]) <= 1.1),
    Rule("decode.extrapolation.none", ("top",), substantive=False),
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

GROWING = {"decode.uncached.growth_dominates", "decode.uncached.fixed_dominates", "decode.cached.grows"}
CHOOSERS = (TOTALS, UNCACHED, CROSSOVER, STEP_EXPONENT, STEP_UNREAD, STEP_STEEP, CUMULATIVE, CACHED, EXTRAPOLATION,
            GROWTH)

_GROWTH_ZH = ("有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 涨到 {last}，拟合斜率 {slope}：缓存里每多一个 "
              "token，每一步就多花这么多时间。在 t = {t1} 附近，这部分占单步的 {share}，{size}。每多一个 token 要多读 "
              "{per_token} 的 K/V；若把这部分时间全算作读缓存，等效读取速度约 {rate}，其中还包括和这些 K/V 做注意力的计算，"
              "所以真正的读取速度只会更快。")
_RERUN = "把上面面板里的「重复次数（取中位数）」调大，点「运行测量」，再运行这一格；机器忙时先关掉别的占 CPU 的程序。"
ZH = Catalog("zh", {
    "decode.totals.faster": "两种方式生成了同样的 {n} 个新 token：无缓存累计 {none_s}，有缓存 {kv_s}，有缓存快 {speedup}。",
    "decode.totals.unclear": "两种方式生成了同样的 {n} 个新 token：无缓存累计 {none_s}，有缓存 {kv_s}；这一次有缓存没有更快，"
                             "多半是计时被别的程序打断了，" + _RERUN,
    "decode.uncached.growth_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                        "附近到 t = {t1} 附近）。多出的时间花在随 t 增长的投影、前馈网络和注意力上，按它们的 "
                                        "FLOP 数折算约 {rate}；在 t = {t1} 附近这部分占单步的 {share}，随 t 增长的部分占大头。",
    "decode.uncached.fixed_dominates": "无缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} "
                                       "附近到 t = {t1} 附近）。多出的时间按随 t 增长的 FLOP 数折算约 {rate}；在 t = {t1} "
                                       "附近这部分只占单步的 {share}，固定开销仍占大头。",
    "decode.uncached.flat": "无缓存：单步耗时的中位数 {median}，t = {t0} 附近 {first}，t = {t1} 附近 {last}，在这么短的长度内"
                            "看不出随 t 的增长：固定开销（例如在 GPU 上逐个启动核函数）盖过了随 t 增长的计算；把生成长度"
                            "调大，才看得出增长从哪里开始。",
    "decode.uncached.noisy": "无缓存：t = {t0} 附近单步耗时的中位数 {first}，t = {t1} 附近 {last}，全部步的中位数 {median}："
                             "这一次计时太乱（或长度太短），说不清随 t 增长了多少；把生成长度调大或" + _RERUN,
    "decode.crossover.far": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，远超这次测量的最大长度 t = {n}。",
    "decode.crossover.near": "按 FLOP 数，t² 项要到 t ≈ {cross} 才追上线性项，已经接近这次测量的最大长度 t = {n}。",
    "decode.crossover.passed": "按 FLOP 数，t² 项在 t ≈ {cross} 追上线性项，这次测量（最大 t = {n}）已经越过了它。",
    "decode.step_exponent.flat": "{mode}的单步指数 {k} 接近 0（后半段从 {from} 到 {to}）：后半段的单步耗时几乎不随 t 变，"
                                 "固定开销为主。",
    "decode.step_exponent.mixed": "{mode}的单步指数 {k} 在 0 和 1 之间（后半段从 {from} 涨到 {to}）：固定开销和随 t 增长的"
                                  "部分都有份。",
    "decode.step_exponent.linear": "{mode}的单步指数 {k} 接近 1（后半段从 {from} 涨到 {to}）：后半段的单步耗时大致随 t "
                                   "成正比地变长。",
    "decode.exponent_unread.noisy": "{mode}的单步指数 {k}：上一句已经说明，这么短的长度内随 t 增长的那一项分不出来，这个指数"
                                   "反映的是计时波动，不作解读（下一节用 1,024 个 token 专门测有缓存的增长）。",
    "decode.exponent_steep.not_t2": "{mode}的单步指数 {k} 大于 1（后半段从 {from} 涨到 {to}），比按 FLOP 数预计"
                                                 "的更陡：在这个长度上 t² 项还很小（见上面的转折点），多出来的陡度来自计时"
                                                 "波动和矩阵乘法在不同长度下效率不同，不是 t² 项。",
    "decode.step_exponent.between": "{mode}的单步指数 {k} 在 1 和 2 之间（后半段从 {from} 涨到 {to}）：t² 部分已经显现。",
    "decode.step_exponent.quadratic": "{mode}的单步指数 {k} 接近 2（后半段从 {from} 涨到 {to}）：t² 部分为主。",
    "decode.step_exponent.noisy": "{mode}的单步指数 {k} 和后半段实测的单步耗时对不上，或者不在 0 到 2 之间：这是计时噪声；"
                                  + _RERUN,
    "decode.step_exponent.unfit": "{mode}的单步指数这一次拟合不出来；" + _RERUN,
    "decode.cumulative.early_slow": "{mode}的累计指数 {k} 小于 1：前 4 次前向计算（含预填充）平均 {early}，比后半段的单步"
                                    "中位数 {late} 慢得多，累计曲线先陡后缓。",
    "decode.cumulative.linear": "{mode}的累计指数 {k} 接近 1：总时间大致与生成的 token 数 n 成正比。",
    "decode.cumulative.between": "{mode}的累计指数 {k} 在 1 和 2 之间：后面的步更慢（后半段的单步中位数 {late}，前 4 次前向"
                                 "计算平均 {early}），总时间增长得比 n 快。",
    "decode.cumulative.quadratic": "{mode}的累计指数 {k} 接近 2：后面的步慢得多（后半段的单步中位数 {late}，前 4 次前向计算"
                                   "平均 {early}），总时间接近随 n² 增长。",
    "decode.cumulative.noisy": "{mode}的累计指数 {k}：这一次的计时太乱，说不清是哪一段拖慢的；" + _RERUN,
    "decode.cumulative.unfit": "{mode}的累计指数这一次拟合不出来；" + _RERUN,
    "decode.cached.flat": "有缓存：单步耗时的中位数 {median}，t = {t0} 附近 {first}，t = {t1} 附近 {last}，看不出随 t 的增长："
                          "读缓存那一项在这么短的长度内淹没在固定开销和计时噪声里。",
    "decode.cached.grows": "有缓存：把各步按 t 分成八段，每段单步耗时的中位数基本上一段比一段长：{eighths}（从 t = {t0} 附近到 "
                           "t = {t1} 附近）；随 t 增长的部分在 t = {t1} 附近约占单步的 {share}。",
    "decode.cached.noisy": "有缓存：单步耗时的中位数 {median}，t = {t0} 附近 {first}，t = {t1} 附近 {last}：这一次计时噪声太大，"
                           "说不清随 t 增长了多少；" + _RERUN,
    "decode.extrapolation.both": "按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}，有缓存每步的耗时随 t 增长约 {slope}），"
                                 "把滑块拉到最右（{top} 个 token），无缓存一次约需 {none_min}，有缓存约 {kv_s}。",
    "decode.extrapolation.kv_flat": "按这次测得的增长外推（无缓存随 t 增长的计算约 {rate}），把滑块拉到最右（{top} 个 token），"
                                    "无缓存一次约需 {none_min}；有缓存这次没测出随 t 的增长，按单步中位数 {median} 算约 "
                                    "{kv_s}（读缓存那一项没算进去，实际会更长，长多少见下一节测出的斜率）。",
    "decode.extrapolation.none": "这一次说不清无缓存的单步耗时随 t 怎样增长，就不按它外推到滑块最右（{top} 个 token）；"
                                 "把生成长度调大或" + _RERUN,
    **{f"decode.growth.{size}": _GROWTH_ZH.replace("{size}", word)
       for size, word in (("large", "占了大头"), ("half", "约占一半"), ("notable", "已经不小"), ("small", "还不大"))},
    "decode.growth.flat": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，几乎不变：读缓存那一项"
                          "淹没在固定开销里（在 GPU 上，时间主要花在逐个启动核函数上，常常就是这样）。",
    "decode.growth.noisy": "有缓存，t 从 {t0} 附近到 {t1} 附近：单步耗时的中位数从 {first} 到 {last}，这一次没有测出清楚的"
                           "增长，计时噪声盖过了它；重跑这一格，或者把这一格里的 new_tokens=1024 改大（最多约 2000）再试。",
}, words={"none": "无缓存", "kv": "有缓存", "min": "分钟"})


def show_claims(claims: list[Claim]) -> None:
    """Display this chapter's claims in Chinese, recorded in the output's metadata (``kvlab.claims.show``)."""
    show(claims, ZH)


def _exponent_claims(timing: DecodeTiming, mode: str, growth: Claim, crossover: Claim) -> list[Claim]:
    """The step exponent (fitted over the second half) beside the medians of that half's first and last eighth;
    the cumulative exponent beside the first 4 passes' mean and the second half's median step. The exponent's
    reading agrees with the sentences before it: ``growth`` (this mode's steps: can't tell -> not read; level ->
    only "level") and the counted ``crossover`` (far -> a steep exponent is not the t² term)."""
    steps_ms = [s * 1e3 for s in timing.step_seconds]
    early, late = sum(steps_ms[:4]) / len(steps_ms[:4]), median(steps_ms[1 + (len(steps_ms) - 1) // 2:])
    eighths = timing_ends(timing).eighths_ms
    step = {"k": number(timing.step_exponent, kind=DIFFERENCE), "from": _ms(eighths[len(eighths) // 2]),
            "to": _ms(eighths[-1])}
    k_cum = number(timing.cumulative_exponent, kind=DIFFERENCE)
    reading = STEP_EXPONENT.choose(step, {"mode": mode})
    read = STEP_EXPONENT.rule(reading.key).substantive  # an exponent already said to be noise or unfit stays so
    if read and (growth.key.endswith(".noisy")
                 or (growth.key.endswith(".flat") and reading.key != "decode.step_exponent.flat")):
        reading = STEP_UNREAD.choose(step, {"mode": mode})
    elif reading.key in ("decode.step_exponent.between", "decode.step_exponent.quadratic") \
            and crossover.key == "decode.crossover.far":
        reading = STEP_STEEP.choose(step, {"mode": mode})
    return [reading,
            CUMULATIVE.choose({"k": k_cum, "early": _ms(early), "late": _ms(late)}, {"mode": mode})]


def explain_latency(results: dict[str, DecodeTiming], model: ToyTransformer) -> list[Claim]:
    """What this run measured, as claims (:data:`CHOOSERS`; :func:`show_claims` prints them): the totals, the
    uncached steps' growth from measured medians, the counted crossover, both modes' exponents, the cached steps,
    and the slider's right end extrapolated from the growth this run measured (or not at all)."""
    c = model.config
    flops = uncached_flops(c)
    none_t, kv_t = results["none"], results["kv"]
    none, kv = timing_ends(none_t), timing_ends(kv_t)
    total_none, total_kv = none_t.cumulative_seconds[-1], kv_t.cumulative_seconds[-1]
    rate = ratio(flops(none.t1) - flops(none.t0), none.last_ms - none.first_ms) / 1e6
    uncached = UNCACHED.choose({**_ends_numbers(none), "rate": number(rate, 1, "GFLOP/s")})
    cached = CACHED.choose(_ends_numbers(kv))
    if uncached.key not in GROWING:
        rate = math.nan  # extrapolate only from a growth this run measured and said
    kv_slope = kv.slope_ms if cached.key in GROWING else math.nan
    top = c.max_seq_len - 8
    lengths = range(5, top + 4)  # the slider's right end: a prompt of 4, then top - 1 decode passes
    none_s = sum(none.first_ms + (flops(t) - flops(none.t0)) / (rate * 1e6) for t in lengths) / 1e3
    kv_s = (sum(kv.first_ms + kv_slope * (t - kv.t0) for t in lengths) / 1e3 if cached.key in GROWING
            else kv.median_ms * top / 1e3)
    n = none_t.seq_len[-1]
    crossover = CROSSOVER.choose({"cross": _count(crossover_length(model)), "n": _count(n)})
    return [
        TOTALS.choose({"n": _count(kv_t.new_tokens), "none_s": number(total_none, 2, "s"),
                       "kv_s": number(total_kv, 2, "s"), "speedup": number(ratio(total_none, total_kv), 1, "×")}),
        uncached,
        crossover,
        *_exponent_claims(none_t, "none", uncached, crossover),
        cached,
        *_exponent_claims(kv_t, "kv", cached, crossover),
        EXTRAPOLATION.choose({"rate": number(rate, 1, "GFLOP/s"), "slope": number(kv_slope * 1e3, 2, "µs/token"),
                              "top": _count(top), "none_min": number(none_s / 60, 1, "min"),
                              "median": _ms(kv.median_ms), "kv_s": number(kv_s, 1, "s")}),
    ]


def explain_growth(fit: StepFit, model: ToyTransformer) -> list[Claim]:
    """The long cached run as a claim (:data:`GROWTH`): measured medians at both ends, the fitted slope only where
    it agrees with them, and the cache read rate it implies."""
    ends = step_ends(fit.t, fit.step_ms)
    per_token = format_bytes(kv_bytes_per_token(model.config)).split()
    rate = ratio(kv_bytes_per_token(model.config), fit.slope_ms / 1e3) / 1e9 if fit.slope_ms > 0 else math.nan
    return [GROWTH.choose({**_ends_numbers(ends), "slope": number(fit.slope_ms * 1e3, 2, "µs/token", DIFFERENCE),
                           "per_token": Number(per_token[0], per_token[1]), "rate": number(rate, 1, "GB/s")})]
