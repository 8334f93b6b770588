"""Exercises of chapter 3.3: how large a decode batch must be to cross this machine's ridge point, and why no batch
does once each sequence's own K/V dominates; TTFT, TPOT and the inter-token latency read from a trace. The roofs are the ones the page
measured (the page's ``roofs``, passed to :func:`this_machine` by the exercise cell), measured the same way when
they are missing or not believable."""
from __future__ import annotations

import html
import math
import statistics
from dataclasses import dataclass

from ..costs import pass_cost
from ..generation import GenerationResult, generate
from ..device import pick_device
from ..language import get_language
from ..measure import ROOFLINE_CONFIG, Roofs, measure_roofs, measurement_threads, torch_threads
from ..memory import format_bytes
from ..phrases import Phrasebook
from ..tokenizer import TOKENIZERS
from . import checker
from .checker import Exercise, ExerciseText, Verdict, right, wrong
from .tools import demo

NOTEBOOK = "03_prefill_and_decode.ipynb"
SETUP = """from IPython.display import display

from kvlab.costs import pass_cost
from kvlab.exercises import ch03"""

# The trace's prompt in each demo model's language: 21 tokens on either model, so that a chunk of 8 splits it into
# three prefill passes (8, 8 and 5 tokens), the last one part-filled.
TRACE_PROMPTS = Phrasebook("ch03.prompts", {
    "zh": {"trace": "人工智能模型处理一个请求，通常分为两个阶段"},
    "en": {"trace": "An artificial intelligence model serves a request in two stages: first prefill, then decode"},
})

# What the exercises show and the two graders say, in the course's language when they say it (the checker's own
# words are kvlab.exercises.phrases.CHECKER's).
FEEDBACK = Phrasebook("ch03.feedback", {
    "zh": {
        # 1. can batching push decode past the ridge?
        "machine": "本机（{device}，{source}）：读带宽 {bandwidth:.1f} GB/s（machine.bandwidth，字节/秒），"
                   "矩阵乘法 {flops:.1f} GFLOP/s（machine.flops，FLOP/秒）",
        "source.now": "刚测出的",
        "source.page": "本页上面测出的",
        "source.refused": "刚测出的；传进来的 roofs 不是本页测出的屋顶，没有采用",
        "inverted": "倒过来了：转折点 = 算力 ÷ 带宽（FLOP/秒 ÷ 字节/秒 = FLOP/字节）",
        "units": "单位不一致：算力和带宽要都用「每秒」的原始单位（FLOP/秒、字节/秒）",
        "ridge_off": "不对：你写的是 {value:.4g}，按本机的测量算出来不是这个数",
        "not_integer": "要写一个整数 B（或 0），收到的是 {value:g}",
        "limit": "B 无限大时，算术强度趋近于 {limit:.2f} FLOP/字节（每多一条序列多出的运算 ÷ 多出的字节）",
        "never": "B 再大也做不到：{limit}，低于转折点 {ridge:.3g}。多出的字节主要是这条序列自己的 K/V，批处理摊不薄它",
        "some_batch": "有 B 能做到：{limit}，高于转折点 {ridge:.3g}",
        "weights_only": "字节数只算了权重：每条序列还要读写它自己的 K/V（用 .bytes，或直接用 .intensity）",
        "swapped": "这是缓存里有 {context} 个 token 时的答案：两个上下文长度弄反了",
        "below_ridge": "B = {batch} 时算术强度 {intensity:.2f}，还低于转折点 {ridge:.3g}",
        "not_smallest": "B = {smallest} 就已经够了，B = {batch} 不是最小的",
        "machine_arg": "第一个参数要传上一格的 machine（ch03.this_machine(roofs) 的结果）。",
        "machine_made_up": "machine 里的带宽或算力不是任何真实机器能测出的数：请传上一格 ch03.this_machine(roofs) 的结果，"
                           "不要自己构造 Machine。",
        "ridge_right": "正确！本机转折点约 {ridge:.3g} FLOP/字节。",
        "reading_never": "缓存里有 {context} 个 token 时，B 再大也越不过转折点：算术强度最多趋近于 {limit:.2f} FLOP/字节，"
                         "解码始终访存受限。",
        "reading_from": "缓存里有 {context} 个 token 时，B = {batch} 起一步解码就算力受限（算术强度 "
                        "{intensity:.2f}；B 无限大时趋近于 {limit:.2f}）。",
        "ridge_moral": "批处理摊薄的只是读权重的代价，摊不薄每条序列自己的 K/V。",
        # both graders
        "answer_wrong": "{name}：{message}",
        "n_wrong": "{n} 处不对。",
        "n_wrong_one": "{n} 处不对。",
        "n_wrong_missing": "{n} 处不对，还有 {missing} 没填。",
        "n_wrong_missing_one": "{n} 处不对，还有 {missing} 没填。",
        "missing_sep": "、",
        "partly": "填完的都对，还有 {missing} 没填。",
        # 2. TTFT, TPOT and ITL from a trace
        "phase.prefill": "预填充",
        "phase.decode": "解码",
        "trace_row": "{i:>3} {phase:8s} 新 token {n:>3}  序列 {s:>3}  {ms:.3f} ms",
        "head.pass": "第几次前向计算",
        "head.phase": "phase",
        "head.phase_name": "阶段",
        "head.new": "新 token 数",
        "head.seq": "序列长度",
        "head.ms": "耗时（ms）",
        "seconds": "这是秒：{name} 要写毫秒（× 1000）",
        "ms_off": "不对：你写的是 {value:.4g} ms",
        "phase_sep": "、",
        "no_phase": "traced 的 trace 里没有{missing}的前向计算：请传上一格 ch03.traced_run() 的结果（它生成 {new} 个 token，"
                    "有预填充也有解码）。",
        "unreal_times": "traced 里的耗时不像真实测量（每次前向计算都要花一点时间，不会是 0、负数或无穷）：请重新运行上一格，"
                        "传 ch03.traced_run() 的结果。",
        "traced_arg": "第一个参数要传上一格的 traced（ch03.traced_run() 的结果）。",
        "first_chunk": "只算了第一次预填充：提示词分成了 {chunks} 块，TTFT 要把 {chunks} 次预填充都加起来",
        "last_chunk": "只算了最后一次预填充：前面几块也要算进去",
        "plus_decode": "多算了第一次解码：第一个新 token 在最后一次预填充之后就出来了",
        "whole_run": "这是整个生成的总时间：TTFT 只到第一个新 token 为止",
        "tpot_median": "这是解码步的中位数，也就是 ITL 的中位数：TPOT 是平均值，（总时间 − TTFT）÷（新 token 数 − 1）",
        "one_too_many": "分母多了 1：解码只有 {steps} 步（第 1 个新 token 来自预填充），TPOT = 解码总时间 ÷（新 token 数 − 1）",
        "prefill_averaged": "把预填充也平均进来了：TPOT 只看解码步",
        "total_over_new": "这是总时间除以 {new} 个新 token（含预填充）：TPOT 先减去 TTFT，再除以 {rest}",
        "itl_mean": "这是解码步的平均值，也就是 TPOT：ITL 这里要的是中位数",
        "itl_prefill": "把预填充也算进来了：ITL 只看解码步之间的间隔",
        "timing_right": "正确！TTFT = {chunks} 次预填充之和 = {ttft:.3f} ms；TPOT = {steps} 个解码步的平均 = "
                        "{tpot:.3f} ms；ITL 的中位数 = {itl:.3f} ms（TPOT 是它的 {ratio:.2f} 倍：{tail}）。",
        "tail.slow_steps": "有几步特别慢，拉高了平均值",
        "tail.even": "这次各步耗时比较均匀",
    },
    "en": {
        "machine": "This machine ({device}, {source}): read bandwidth {bandwidth:.1f} GB/s (machine.bandwidth, in "
                   "bytes/s), matrix multiplication {flops:.1f} GFLOP/s (machine.flops, in FLOP/s)",
        "source.now": "measured just now",
        "source.page": "as measured above on this page",
        "source.refused": "measured just now; the roofs passed in are not the ones this page measured, so they were "
                          "not used",
        "inverted": "Upside down: ridge point = compute ÷ bandwidth (FLOP/s ÷ bytes/s = FLOP/byte)",
        "units": "Units don't match: give compute and bandwidth both in their raw per-second units (FLOP/s, "
                 "bytes/s)",
        "ridge_off": "Not right: you wrote {value:.4g}, and that is not what this machine's measurements give",
        "not_integer": "Write a whole number B (or 0); got {value:g}",
        "limit": "as B grows without bound, the arithmetic intensity tends to {limit:.2f} FLOP/byte (the FLOPs one "
                 "more sequence adds ÷ the bytes it adds)",
        "never": "No B gets there: {limit}, below the ridge point of {ridge:.3g}. The bytes each added sequence brings "
                 "are mostly its own K/V, and batching cannot spread those out",
        "some_batch": "Some B does get there: {limit}, above the ridge point of {ridge:.3g}",
        "weights_only": "You counted only the weights' bytes: each sequence also reads and writes its own K/V (use "
                        ".bytes, or simply .intensity)",
        "swapped": "That is the answer for {context} cached tokens: the two context lengths are swapped",
        "below_ridge": "At B = {batch} the arithmetic intensity is {intensity:.2f}, still below the ridge point of "
                       "{ridge:.3g}",
        "not_smallest": "B = {smallest} is already enough, so B = {batch} is not the smallest",
        "machine_arg": "Pass the machine from the cell above as the first argument (what ch03.this_machine(roofs) "
                       "returned).",
        "machine_made_up": "The bandwidth or compute in machine is not a number any real machine measures: pass the "
                           "result of ch03.this_machine(roofs) from the cell above rather than building a Machine "
                           "yourself.",
        "ridge_right": "Correct! This machine's ridge point is about {ridge:.3g} FLOP/byte.",
        "reading_never": "With {context} tokens in each cache, no B gets past the ridge point: the arithmetic "
                         "intensity only tends to {limit:.2f} FLOP/byte, and decoding stays memory-bound.",
        "reading_from": "With {context} tokens in each cache, a decode step is compute-bound from B = {batch} on "
                        "(arithmetic intensity {intensity:.2f}; it tends to {limit:.2f} as B grows without bound).",
        "ridge_moral": "Batching spreads out only the cost of reading the weights, never each sequence's own K/V.",
        "answer_wrong": "{name}: {message}",
        "n_wrong": "{n} answers are wrong.",
        "n_wrong_one": "{n} answer is wrong.",
        "n_wrong_missing": "{n} answers are wrong; still to fill in: {missing}.",
        "n_wrong_missing_one": "{n} answer is wrong; still to fill in: {missing}.",
        "missing_sep": ", ",
        "partly": "what you filled in is right; still to fill in: {missing}.",
        "phase.prefill": "prefill",
        "phase.decode": "decode",
        "trace_row": "{i:>3} {phase:8s} new tokens {n:>3}  sequence {s:>3}  {ms:.3f} ms",
        "head.pass": "Forward pass",
        "head.phase": "phase",
        "head.phase_name": "Phase",
        "head.new": "New tokens",
        "head.seq": "Sequence length",
        "head.ms": "Time (ms)",
        "seconds": "That is in seconds: {name} wants milliseconds (× 1000)",
        "ms_off": "Not right: you wrote {value:.4g} ms",
        "phase_sep": " or ",
        "no_phase": "The trace in traced has no {missing} forward pass: pass the result of ch03.traced_run() from the "
                    "cell above (it generates {new} tokens, with both prefill and decode).",
        "unreal_times": "The times in traced don't look like real measurements (every forward pass takes some time, "
                        "never 0, a negative time or infinity): run the cell above again and pass the result of "
                        "ch03.traced_run().",
        "traced_arg": "Pass traced from the cell above as the first argument (what ch03.traced_run() returned).",
        "first_chunk": "You counted only the first prefill pass: the prompt was split into {chunks} chunks, and TTFT "
                       "adds up all {chunks} prefill passes",
        "last_chunk": "You counted only the last prefill pass: the chunks before it count too",
        "plus_decode": "You added the first decode step: the first new token is out as soon as the last prefill pass "
                       "ends",
        "whole_run": "That is the whole generation's time: TTFT stops at the first new token",
        "tpot_median": "That is the median decode step, i.e. ITL's median: TPOT is the mean, (total time − TTFT) ÷ "
                       "(new tokens − 1)",
        "one_too_many": "The divisor is 1 too big: there are only {steps} decode steps (the 1st new token comes "
                        "from the prefill), so TPOT = total decode time ÷ (new tokens − 1)",
        "prefill_averaged": "You averaged in the prefill passes too: TPOT looks at decode steps only",
        "total_over_new": "That is the total time divided by all {new} new tokens (prefill included): TPOT first "
                          "takes away TTFT, then divides by {rest}",
        "itl_mean": "That is the mean decode step, i.e. TPOT: ITL's median is wanted here",
        "itl_prefill": "You counted the prefill passes too: ITL looks only at the gaps between decode steps",
        "timing_right": "Correct! TTFT = the sum of {chunks} prefill passes = {ttft:.3f} ms; TPOT = the mean of {steps} "
                        "decode steps = {tpot:.3f} ms; ITL's median = {itl:.3f} ms (TPOT is {ratio:.2f} times that: "
                        "{tail}).",
        "tail.slow_steps": "a few steps were particularly slow and pulled the mean up",
        "tail.even": "the steps took about equally long this time",
    },
})
say = FEEDBACK.say


def _verdict_counts(bad: list[str], missing: list[str]) -> str:
    """The verdict's first line: how many answers are wrong and which are still None."""
    one = "_one" if len(bad) == 1 else ""
    if missing:
        return say("n_wrong_missing" + one, n=len(bad), missing=say("missing_sep").join(missing))
    return say("n_wrong" + one, n=len(bad))

# == 1. can batching push decode past the ridge? ============================================================
CONFIG = ROOFLINE_CONFIG  # the page's `big`
SHORT, LONG = 100, 1000  # tokens already in each sequence's cache (lengths the page's panel does not show)


@dataclass(frozen=True)
class Machine:
    """This machine's two roofs: memory read bandwidth (bytes/s) and matmul rate (FLOP/s)."""

    bandwidth: float
    flops: float
    device: str
    source: str = "now"  # where the roofs come from: a key of SOURCES (said in the course's language), or words

    def __str__(self) -> str:
        source = say(f"source.{self.source}") if self.source in SOURCES else self.source
        return say("machine", device=self.device, source=source, bandwidth=self.bandwidth / 1e9,
                   flops=self.flops / 1e9)


SOURCES = ("now", "page", "refused")  # measured just now; on this page above; just now, the roofs passed refused


# What any machine a learner runs this on measures: from a slow laptop core (0.1 GB/s, 0.1 GFLOP/s) to well past
# today's largest accelerators (100 TB/s of memory bandwidth, 100 PFLOP/s).
BELIEVABLE_BANDWIDTH = (1e8, 1e14)  # bytes/s
BELIEVABLE_FLOPS = (1e8, 1e17)  # FLOP/s


def believable_rates(bandwidth, flops) -> bool:
    """Two rates (bytes/s, FLOP/s) a real machine could have (real numbers within the bounds above)."""
    try:
        bandwidth, flops = float(checker.parse_number(bandwidth)), float(checker.parse_number(flops))
    except checker.AnswerError:
        return False
    return (BELIEVABLE_BANDWIDTH[0] <= bandwidth <= BELIEVABLE_BANDWIDTH[1]
            and BELIEVABLE_FLOPS[0] <= flops <= BELIEVABLE_FLOPS[1])


def believable(roofs) -> bool:
    """``roofs`` is a :class:`~kvlab.measure.Roofs` whose two rates a real machine could have."""
    return isinstance(roofs, Roofs) and believable_rates(roofs.bandwidth.best, roofs.flops.best)


def this_machine(roofs=None, device=None) -> Machine:
    """The roofs the page measured above (``roofs``: what ``lesson.measure_roofs`` returned there), or, when they
    are missing or not believable (not kvlab's result, or rates no machine has), the roofs measured now the same
    way on ``device`` (default: the best one here)."""
    if believable(roofs):
        return Machine(roofs.bandwidth.best, roofs.flops.best, roofs.device, "page")
    measured = measure_roofs(pick_device() if device is None else device)
    source = "now" if roofs is None else "refused"
    return Machine(measured.bandwidth.best, measured.flops.best, measured.device, source)


@dataclass(frozen=True)
class BatchAnswer:
    """The smallest compute-bound batch at one context length, and the intensity the batch tends to."""

    context: int
    limit: float  # intensity as B grows without bound: one more sequence's FLOPs over its bytes
    smallest: int  # smallest B with intensity >= ridge; 0 when none

    def intensity(self, batch_size: int) -> float:
        return pass_cost(CONFIG, 1, self.context, batch_size).intensity


def smallest_batch(ridge: float, context: int) -> BatchAnswer:
    """Exactly: every count of :func:`pass_cost` grows linearly in B, so the first B is solved for, then checked."""
    one, two = pass_cost(CONFIG, 1, context, 1), pass_cost(CONFIG, 1, context, 2)
    d_flops, d_bytes = two.flops - one.flops, two.bytes - one.bytes
    limit = d_flops / d_bytes
    if d_flops <= ridge * d_bytes:
        return BatchAnswer(context, limit, 0)
    B = 1 + max(0, math.ceil((ridge * one.bytes - one.flops) / (d_flops - ridge * d_bytes)))
    while B > 1 and pass_cost(CONFIG, 1, context, B - 1).intensity >= ridge:
        B -= 1
    while pass_cost(CONFIG, 1, context, B).intensity < ridge:
        B += 1
    return BatchAnswer(context, limit, B)


def weights_only_batch(ridge: float, context: int) -> int:
    """The answer if each sequence's K/V were left out of the bytes (weights only)."""
    B = 1
    while B < 100_000:
        c = pass_cost(CONFIG, 1, context, B)
        if c.flops >= ridge * c.weight_bytes:
            return B
        B += 1
    return 0


BATCH_RIDGE = Exercise(
    key="ch03.batch_ridge",
    title="练习 1：批处理能把解码推过转折点吗",
    task=f"""本页的大模型 `big`（配置就是 `ch03.CONFIG`：{CONFIG.n_layer} 层，d_model = {CONFIG.d_model}，\
{CONFIG.n_params():,} 个参数，FP32 权重 {format_bytes(4 * CONFIG.n_params())}）一步解码 B 条序列、每条序列的缓存里\
已有 C 个 token 时，这次前向的运算数和读写字节数是 `pass_cost(ch03.CONFIG, 1, C, B)`（`.flops`、`.bytes`，\
算术强度 `.intensity`）。

B 越大，读一遍权重的代价被摊得越薄，算术强度越高；但每条序列都要读它自己的 K/V，这一部分不会被摊薄。下面的代码格\
直接取本页上面测出的两个屋顶（没运行上面的格时就现在测一次）。请填写：

* `ridge`：本机的转折点（FLOP/字节）；
* `b_short`：每条序列的缓存里已有 {SHORT} 个 token 时，能让一步解码**算力受限**（算术强度不低于转折点）的最小 B；
* `b_long`：同样的问题，缓存里已有 {LONG} 个 token。

两问都一样：如果 B 再大也做不到，写 `0`。

答案按这台机器上测出的屋顶检查。屋顶是此刻在这台机器上量的：换一台机器，或者同一台机器忙闲不同，\
转折点都会变（上面打印了重复测量之间的波动），`b_short` 可能差上几条。所以你和同学的数字多半不一样，各自都可以是对的；\
要比较的是算法，不是答案。""",
    stub=f'''machine = ch03.this_machine(roofs)  # the two roofs this page measured above (the cell `roofs = ...`)
print(machine)
ridge = None  # FLOP per byte
b_short = None  # the smallest B that makes a decode step after {SHORT} cached tokens compute-bound
b_long = None  # the same after {LONG} cached tokens; 0 when no B does''',
    check="ch03.check_batch_ridge(machine, ridge, b_short, b_long)",
    hints=(
        "转折点 = 算力 ÷ 带宽 = machine.flops / machine.bandwidth；某个 B 的算术强度是 "
        "pass_cost(ch03.CONFIG, 1, C, B).intensity。",
        "B 每加 1，flops 和 bytes 各多出一份固定的量（这条序列自己的运算和它的 K/V 等）：B 无限大时，算术强度趋近于"
        "这两个增量之比。这个极限不高于转折点时答案是 0；否则从 B = 1 往上试。",
    ),
    english=ExerciseText(
        title="Exercise 1: can batching push decoding past the ridge point?",
        task=f"""When the page's big model `big` (its configuration is `ch03.CONFIG`: {CONFIG.n_layer} layers, \
d_model = {CONFIG.d_model}, {CONFIG.n_params():,} parameters, {format_bytes(4 * CONFIG.n_params())} of FP32 weights) \
decodes one step for B sequences that each already hold C tokens in their cache, the FLOPs and bytes read and \
written by that forward pass are `pass_cost(ch03.CONFIG, 1, C, B)` (`.flops`, `.bytes`, and the arithmetic \
intensity `.intensity`).

The larger B, the thinner the cost of reading the weights once is spread, and the higher the arithmetic intensity; \
but every sequence still reads its own K/V: batching does not amortize that part. The code cell below takes the two \
roofs this page measured above (or measures them now if you did not run that cell). Fill in:

* `ridge`: this machine's ridge point (FLOP/byte);
* `b_short`: the smallest B that makes a decode step **compute-bound** (arithmetic intensity at or above the ridge \
point) when each sequence's cache already holds {SHORT} tokens;
* `b_long`: the same question when the cache already holds {LONG} tokens.

For both: if no B, however large, gets there, write `0`.

Your answers are checked against the roofs measured on this machine. They were measured here and now: on another \
machine, or on this one when it is busier or idler, the ridge point moves (the spread between repeated measurements \
is printed above), and `b_short` may be off by a few. So your numbers will most likely differ from a classmate's and \
both can be right; what to compare is the method, not the answer.""",
        hints=(
            "Ridge point = compute ÷ bandwidth = machine.flops / machine.bandwidth; the arithmetic intensity at some "
            "B is pass_cost(ch03.CONFIG, 1, C, B).intensity.",
            "Each time B grows by 1, flops and bytes each grow by a fixed amount (that sequence's own FLOPs, its K/V, "
            "and so on): as B grows without bound, the arithmetic intensity tends to the ratio of those two "
            "increments. When that limit is not above the ridge point, the answer is 0; otherwise try B = 1 upward.",
        ),
    ),
)

REL = 0.01  # numbers the learner computes from the same measurements: 1 % covers rounding


def _number(got) -> float | str:
    """The answer as a float, or the sentence saying why it is not a number."""
    try:
        return float(checker.parse_number(got, ""))
    except checker.AnswerError as exc:
        return str(exc)


def _ridge_problem(got, want: float) -> str | None:
    value = _number(got)
    if isinstance(value, str):
        return value
    if checker.close(value, want, REL):
        return None
    if checker.close(value, 1 / want, REL):
        return say("inverted")
    if checker.close(value, want * 1e9, REL) or checker.close(value, want / 1e9, REL):
        return say("units")
    return say("ridge_off", value=value)


def _batch_problem(got, truth: BatchAnswer, other: BatchAnswer, ridge: float) -> str | None:
    value = _number(got)
    if isinstance(value, str):
        return value
    if not value.is_integer() or value < 0:
        return say("not_integer", value=value)
    B = int(value)
    if B == truth.smallest:
        return None
    limit = say("limit", limit=truth.limit)
    if truth.smallest == 0:
        return say("never", limit=limit, ridge=ridge)
    if B == 0:
        return say("some_batch", limit=limit, ridge=ridge)
    if B == weights_only_batch(ridge, truth.context):
        return say("weights_only")
    if B == other.smallest:
        return say("swapped", context=other.context)
    if B < truth.smallest:
        return say("below_ridge", batch=B, intensity=truth.intensity(B), ridge=ridge)
    return say("not_smallest", smallest=truth.smallest, batch=B)


def grade_batch_ridge(machine: Machine, ridge, b_short, b_long) -> Verdict:
    answers = {"ridge": ridge, "b_short": b_short, "b_long": b_long}
    if all(v is None for v in answers.values()):
        return checker.todo()
    if not isinstance(machine, Machine):
        return wrong(say("machine_arg"))
    if not believable_rates(machine.bandwidth, machine.flops):  # graded against what kvlab measured, not made up
        return wrong(say("machine_made_up"))
    want = machine.flops / machine.bandwidth
    short, long = smallest_batch(want, SHORT), smallest_batch(want, LONG)
    problems = {}
    if ridge is not None:
        problems["ridge"] = _ridge_problem(ridge, want)
    if b_short is not None:
        problems["b_short"] = _batch_problem(b_short, short, long, want)
    if b_long is not None:
        problems["b_long"] = _batch_problem(b_long, long, short, want)
    bad = [say("answer_wrong", name=name, message=msg) for name, msg in problems.items() if msg]
    missing = [name for name, v in answers.items() if v is None]
    if bad:
        return wrong(_verdict_counts(bad, missing), *bad)
    if missing:
        return checker.todo(say("partly", missing=say("missing_sep").join(missing)))
    return right(say("ridge_right", ridge=want), *(_reading(a, want) for a in (short, long)), say("ridge_moral"))


def _reading(a: BatchAnswer, ridge: float) -> str:
    if a.smallest == 0:
        return say("reading_never", context=a.context, limit=a.limit)
    return say("reading_from", context=a.context, batch=a.smallest, intensity=a.intensity(a.smallest), limit=a.limit)


def check_batch_ridge(machine, ridge, b_short, b_long):
    return checker.check(BATCH_RIDGE, grade_batch_ridge, machine, ridge, b_short, b_long)


# == 2. TTFT, TPOT and ITL from a trace ====================================================================
TRACE_PROMPT = TRACE_PROMPTS.text("trace", "zh")  # the Chinese model's (trace_prompt: the demo model's own)
TRACE_CHUNK, TRACE_NEW = 8, 16

TTFT_TPOT = Exercise(
    key="ch03.ttft_tpot",
    title="练习 2：从 trace 读出 TTFT、TPOT 和 ITL",
    task=f"""下面的代码格用演示模型生成 {TRACE_NEW} 个 token，提示词分成每块 {TRACE_CHUNK} 个 token 预填充（`prefill_chunk_size={TRACE_CHUNK}`：每次前向只送进提示词的 {TRACE_CHUNK} 个 token，几次前向送完整段提示词，都算预填充），并列出它的 trace：每次前向计算一行，`phase` 是阶段，`seconds` 是耗时。只用这张表（或 `traced.trace`），算出这一个请求的：

* `ttft_ms`：首 token 延迟（TTFT），毫秒：从开始到第一个新 token 出来用了多久；
* `tpot_ms`：每 token 延迟（TPOT），毫秒：（总时间 − TTFT）÷（新 token 数 − 1），也就是解码步耗时的**平均值**；
* `itl_median_ms`：token 间延迟（ITL）的中位数，毫秒：把每一步解码的耗时看成一组数，取中位数。

TPOT 和 ITL 的中位数都在描述「之后每个 token 要等多久」，但一次卡顿会把平均值（TPOT）拉高，却几乎不动中位数；两者差多少，检查结果里会告诉你。

`traced.trace` 是一个列表，每个元素有 `.phase`（`"prefill"` 或 `"decode"`）和 `.seconds`。""",
    stub='''traced = ch03.traced_run()
display(ch03.trace_table(traced))
ttft_ms = None  # milliseconds
tpot_ms = None  # milliseconds
itl_median_ms = None  # milliseconds''',
    check="ch03.check_ttft_tpot(traced, ttft_ms, tpot_ms, itl_median_ms)",
    hints=(
        "第一个新 token 是最后一次预填充算出来的：TTFT 要把所有预填充的前向计算加起来，不包括解码。",
        "TPOT 和 ITL 都只看解码步：TPOT 是它们的平均值（statistics.fmean），ITL 的中位数是 statistics.median；都要 × 1000 换成毫秒。",
    ),
    english=ExerciseText(
        title="Exercise 2: read TTFT, TPOT and ITL off a trace",
        task=f"""The code cell below has the demo model generate {TRACE_NEW} tokens, prefilling the prompt in chunks of {TRACE_CHUNK} tokens (`prefill_chunk_size={TRACE_CHUNK}`: each forward pass takes in only {TRACE_CHUNK} of the prompt's tokens, and it takes a few passes to feed in the whole prompt, all of them prefill), and lists its trace: one row per forward pass, `phase` giving the phase and `seconds` the time it took. Using only this table (or `traced.trace`), work out for this one request:

* `ttft_ms`: the time to first token (TTFT), in milliseconds: how long from the start until the first new token is out;
* `tpot_ms`: the time per output token (TPOT), in milliseconds: (total time − TTFT) ÷ (new tokens − 1), i.e. the **mean** time of a decode step;
* `itl_median_ms`: the median inter-token latency (ITL), in milliseconds: take the decode steps' times as a set of numbers and find their median.

TPOT and ITL's median both describe "how long each later token takes", but one hiccup pulls the mean (TPOT) up while hardly moving the median; the check's result tells you how far apart the two are.

`traced.trace` is a list whose items each have `.phase` (`"prefill"` or `"decode"`) and `.seconds`.""",
        hints=(
            "The first new token comes out of the last prefill pass: TTFT adds up every prefill forward pass, and no "
            "decode step.",
            "TPOT and ITL both look at decode steps only: TPOT is their mean (statistics.fmean), ITL's median is "
            "statistics.median; multiply both by 1000 for milliseconds.",
        ),
    ),
)


def trace_prompt(tokenizer) -> str:
    """The trace's prompt in the language of the demo model ``tokenizer`` belongs to (else the course's)."""
    lang = next((code for code, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), None) or get_language()
    return TRACE_PROMPTS.text("trace", lang)


def traced_run() -> GenerationResult:
    """One generation on the demo model whose prompt is prefilled in chunks (after a warm-up run), timed with the
    threads of the page's other measurements."""
    model, tok = demo()
    ids = tok.encode(trace_prompt(tok))
    with torch_threads(measurement_threads()):
        generate(model, [ids], 4, prefill_chunk_size=TRACE_CHUNK)  # warm-up
        return generate(model, [ids], TRACE_NEW, prefill_chunk_size=TRACE_CHUNK)


def phase_name(phase: str) -> str:
    """A pass's phase in the course's language ("prefill" -> 预填充); an unknown phase as it is."""
    return say(f"phase.{phase}") if phase in ("prefill", "decode") else phase


TABLE_HEADS = ("head.pass", "head.phase", "head.phase_name", "head.new", "head.seq", "head.ms")


class TraceTable:
    """The trace as an HTML table (and text in a terminal), in the course's language when shown."""

    def __init__(self, run: GenerationResult):
        self.rows = [(i + 1, r.phase, r.new_tokens, r.seq_len, r.seconds * 1e3) for i, r in enumerate(run.trace)]

    def __repr__(self) -> str:
        return "\n".join(say("trace_row", i=i, phase=phase, n=n, s=s, ms=ms) for i, phase, n, s, ms in self.rows)

    def _repr_html_(self) -> str:
        # the phase's name in the course's language gets its own column only where it differs from the recorded phase
        # (in English both would read "prefill")
        named = phase_name("prefill") != "prefill"
        heads = TABLE_HEADS if named else tuple(h for h in TABLE_HEADS if h != "head.phase_name")
        head = "".join(f"<th>{html.escape(say(h))}</th>" for h in heads)
        body = "".join(f"<tr><td>{i}</td><td>{phase}</td>"
                       + (f"<td>{html.escape(phase_name(phase))}</td>" if named else "")
                       + f"<td>{n}</td><td>{s}</td><td>{ms:.3f}</td></tr>" for i, phase, n, s, ms in self.rows)
        return f'<table class="kvlab-trace-table"><tr>{head}</tr>{body}</table>'


def trace_table(run: GenerationResult) -> TraceTable:
    return TraceTable(run)


def _close_ms(got: float, want: float) -> bool:
    return abs(got - want) <= 0.005  # ms: a few table entries (3 decimals each) summed by hand


def _timing_problem(name: str, got, want: float, mistakes: dict[str, float]) -> str | None:
    value = _number(got)
    if isinstance(value, str):
        return value
    nearest = min(mistakes.items(), key=lambda m: abs(value - m[1]), default=None)
    if _close_ms(value, want) and not (nearest and abs(value - nearest[1]) < abs(value - want)):
        return None
    if _close_ms(value * 1e3, want):
        return say("seconds", name=name)
    for message, other in mistakes.items():
        if _close_ms(value, other):
            return message
    return say("ms_off", value=value)


def _trace_problem(run: GenerationResult) -> str | None:
    """Why ``run``'s trace is not one kvlab measured (no prefill or decode pass, or times no pass can take), or None."""
    phases = {r.phase for r in run.trace}
    if not {"prefill", "decode"} <= phases:
        missing = say("phase_sep").join(phase_name(p) for p in ("prefill", "decode") if p not in phases)
        return say("no_phase", missing=missing, new=TRACE_NEW)
    if not all(isinstance(r.seconds, float) and math.isfinite(r.seconds) and 0 < r.seconds < 3600 for r in run.trace):
        return say("unreal_times")
    return None


def grade_ttft_tpot(run, ttft_ms, tpot_ms, itl_median_ms=None) -> Verdict:
    """Graded against what kvlab measured for this request: ``time_to_first_token``, ``time_per_output_token``
    (a mean) and the median of ``decode_seconds``."""
    answers = (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("itl_median_ms", itl_median_ms))
    if all(v is None for _, v in answers):
        return checker.todo()
    if not isinstance(run, GenerationResult):
        return wrong(say("traced_arg"))
    problem = _trace_problem(run)
    if problem:
        return wrong(problem)
    ms = lambda rs: [r.seconds * 1e3 for r in rs]  # noqa: E731
    prefill = ms(r for r in run.trace if r.phase == "prefill")
    decode = ms(r for r in run.trace if r.phase == "decode")
    every, n_new = prefill + decode, run.new_tokens.shape[1]
    want_ttft, want_tpot = run.time_to_first_token * 1e3, run.time_per_output_token * 1e3
    want_itl = statistics.median(run.decode_seconds) * 1e3
    problems = {}
    if ttft_ms is not None:
        problems["ttft_ms"] = _timing_problem("ttft_ms", ttft_ms, want_ttft, {
            say("first_chunk", chunks=len(prefill)): prefill[0],
            say("last_chunk"): prefill[-1],
            say("plus_decode"): sum(prefill) + decode[0],
            say("whole_run"): sum(every)})
    if tpot_ms is not None:
        problems["tpot_ms"] = _timing_problem("tpot_ms", tpot_ms, want_tpot, {
            say("tpot_median"): want_itl,
            say("one_too_many", steps=len(decode)): sum(decode) / n_new,
            say("prefill_averaged"): sum(every) / len(every),
            say("total_over_new", new=n_new, rest=n_new - 1): sum(every) / n_new,
        })
    if itl_median_ms is not None:
        problems["itl_median_ms"] = _timing_problem("itl_median_ms", itl_median_ms, want_itl, {
            say("itl_mean"): want_tpot,
            say("itl_prefill"): statistics.median(every),
        })
    bad = [say("answer_wrong", name=name, message=msg) for name, msg in problems.items() if msg]
    missing = [n for n, v in answers if v is None]
    if bad:
        return wrong(_verdict_counts(bad, missing), *bad)
    if missing:
        return checker.todo(say("partly", missing=say("missing_sep").join(missing)))
    tail = say("tail.slow_steps" if want_tpot > 1.15 * want_itl else "tail.even")
    return right(say("timing_right", chunks=len(prefill), ttft=want_ttft, steps=len(decode), tpot=want_tpot,
                     itl=want_itl, ratio=want_tpot / want_itl, tail=tail))


def check_ttft_tpot(run, ttft_ms, tpot_ms, itl_median_ms=None):
    return checker.check(TTFT_TPOT, grade_ttft_tpot, run, ttft_ms, tpot_ms, itl_median_ms)


EXERCISES = (BATCH_RIDGE, TTFT_TPOT)
