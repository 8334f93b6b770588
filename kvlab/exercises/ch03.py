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
from ..measure import ROOFLINE_CONFIG, Roofs, measure_roofs, measurement_threads, torch_threads
from ..memory import format_bytes
from . import checker
from .checker import Exercise, Verdict, right, wrong
from .tools import demo

NOTEBOOK = "03_prefill_and_decode.ipynb"
SETUP = """from IPython.display import display

from kvlab.costs import pass_cost
from kvlab.exercises import ch03"""

# == 1. can batching push decode past the ridge? ============================================================
CONFIG = ROOFLINE_CONFIG  # the page's `big`
SHORT, LONG = 100, 1000  # tokens already in each sequence's cache (lengths the page's panel does not show)


@dataclass(frozen=True)
class Machine:
    """This machine's two roofs: memory read bandwidth (bytes/s) and matmul rate (FLOP/s)."""

    bandwidth: float
    flops: float
    device: str
    source: str = "刚测出的"

    def __str__(self) -> str:
        return (f"本机（{self.device}，{self.source}）：读带宽 {self.bandwidth / 1e9:.1f} GB/s（machine.bandwidth，字节/秒），"
                f"矩阵乘法 {self.flops / 1e9:.1f} GFLOP/s（machine.flops，FLOP/秒）")


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
        return Machine(roofs.bandwidth.best, roofs.flops.best, roofs.device, "本页上面测出的")
    measured = measure_roofs(pick_device() if device is None else device)
    source = "刚测出的" if roofs is None else "刚测出的；传进来的 roofs 不是本页测出的屋顶，没有采用"
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
        return "倒过来了：转折点 = 算力 ÷ 带宽（FLOP/秒 ÷ 字节/秒 = FLOP/字节）"
    if checker.close(value, want * 1e9, REL) or checker.close(value, want / 1e9, REL):
        return "单位不一致：算力和带宽要都用「每秒」的原始单位（FLOP/秒、字节/秒）"
    return f"不对：你写的是 {value:.4g}，按本机的测量算出来不是这个数"


def _batch_problem(got, truth: BatchAnswer, other: BatchAnswer, ridge: float) -> str | None:
    value = _number(got)
    if isinstance(value, str):
        return value
    if not value.is_integer() or value < 0:
        return f"要写一个整数 B（或 0），收到的是 {value:g}"
    B = int(value)
    if B == truth.smallest:
        return None
    limit = f"B 无限大时，算术强度趋近于 {truth.limit:.2f} FLOP/字节（每多一条序列多出的运算 ÷ 多出的字节）"
    if truth.smallest == 0:
        return (f"B 再大也做不到：{limit}，低于转折点 {ridge:.3g}。"
                "多出的字节主要是这条序列自己的 K/V，批处理摊不薄它")
    if B == 0:
        return f"有 B 能做到：{limit}，高于转折点 {ridge:.3g}"
    if B == weights_only_batch(ridge, truth.context):
        return "字节数只算了权重：每条序列还要读写它自己的 K/V（用 .bytes，或直接用 .intensity）"
    if B == other.smallest:
        return f"这是缓存里有 {other.context} 个 token 时的答案：两个上下文长度弄反了"
    if B < truth.smallest:
        return f"B = {B} 时算术强度 {truth.intensity(B):.2f}，还低于转折点 {ridge:.3g}"
    return f"B = {truth.smallest} 就已经够了，B = {B} 不是最小的"


def grade_batch_ridge(machine: Machine, ridge, b_short, b_long) -> Verdict:
    answers = {"ridge": ridge, "b_short": b_short, "b_long": b_long}
    if all(v is None for v in answers.values()):
        return checker.todo()
    if not isinstance(machine, Machine):
        return wrong("第一个参数要传上一格的 machine（ch03.this_machine(roofs) 的结果）。")
    if not believable_rates(machine.bandwidth, machine.flops):  # graded against what kvlab measured, not made up
        return wrong("machine 里的带宽或算力不是任何真实机器能测出的数：请传上一格 ch03.this_machine(roofs) 的结果，"
                     "不要自己构造 Machine。")
    want = machine.flops / machine.bandwidth
    short, long = smallest_batch(want, SHORT), smallest_batch(want, LONG)
    problems = {}
    if ridge is not None:
        problems["ridge"] = _ridge_problem(ridge, want)
    if b_short is not None:
        problems["b_short"] = _batch_problem(b_short, short, long, want)
    if b_long is not None:
        problems["b_long"] = _batch_problem(b_long, long, short, want)
    bad = [f"{name}：{msg}" for name, msg in problems.items() if msg]
    missing = [name for name, v in answers.items() if v is None]
    if bad:
        return wrong(f"{len(bad)} 处不对" + (f"，还有 {'、'.join(missing)} 没填" if missing else "") + "。", *bad)
    if missing:
        return checker.todo(f"填完的都对，还有 {'、'.join(missing)} 没填。")
    return right(f"正确！本机转折点约 {want:.3g} FLOP/字节。", *(_reading(a, want) for a in (short, long)),
                 "批处理摊薄的只是读权重的代价，摊不薄每条序列自己的 K/V。")


def _reading(a: BatchAnswer, ridge: float) -> str:
    if a.smallest == 0:
        return (f"缓存里有 {a.context} 个 token 时，B 再大也越不过转折点：算术强度最多趋近于 {a.limit:.2f} FLOP/字节，"
                "解码始终访存受限。")
    return (f"缓存里有 {a.context} 个 token 时，B = {a.smallest} 起一步解码就算力受限（算术强度 "
            f"{a.intensity(a.smallest):.2f}；B 无限大时趋近于 {a.limit:.2f}）。")


def check_batch_ridge(machine, ridge, b_short, b_long):
    return checker.check(BATCH_RIDGE, grade_batch_ridge, machine, ridge, b_short, b_long)


# == 2. TTFT, TPOT and ITL from a trace ====================================================================
TRACE_PROMPT = "人工智能模型处理一个请求，通常分为两个阶段"
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
)


def traced_run() -> GenerationResult:
    """One generation on the demo model whose prompt is prefilled in chunks (after a warm-up run), timed with the
    threads of the page's other measurements."""
    model, tok = demo()
    ids = tok.encode(TRACE_PROMPT)
    with torch_threads(measurement_threads()):
        generate(model, [ids], 4, prefill_chunk_size=TRACE_CHUNK)  # warm-up
        return generate(model, [ids], TRACE_NEW, prefill_chunk_size=TRACE_CHUNK)


PHASES = {"prefill": "预填充", "decode": "解码"}


class TraceTable:
    """The trace as an HTML table (and text in a terminal)."""

    def __init__(self, run: GenerationResult):
        self.rows = [(i + 1, r.phase, PHASES.get(r.phase, r.phase), r.new_tokens, r.seq_len, r.seconds * 1e3)
                     for i, r in enumerate(run.trace)]

    def __repr__(self) -> str:
        return "\n".join(f"{i:>3} {phase:8s} 新 token {n:>3}  序列 {s:>3}  {ms:.3f} ms"
                         for i, phase, _, n, s, ms in self.rows)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("第几次前向计算", "phase", "阶段", "新 token 数", "序列长度", "耗时（ms）"))
        body = "".join(f"<tr><td>{i}</td><td>{phase}</td><td>{html.escape(zh)}</td><td>{n}</td><td>{s}</td>"
                       f"<td>{ms:.3f}</td></tr>" for i, phase, zh, n, s, ms in self.rows)
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
        return f"这是秒：{name} 要写毫秒（× 1000）"
    for message, other in mistakes.items():
        if _close_ms(value, other):
            return message
    return f"不对：你写的是 {value:.4g} ms"


def _trace_problem(run: GenerationResult) -> str | None:
    """Why ``run``'s trace is not one kvlab measured (no prefill or decode pass, or times no pass can take), or None."""
    phases = {r.phase for r in run.trace}
    if not {"prefill", "decode"} <= phases:
        missing = "、".join(PHASES[p] for p in ("prefill", "decode") if p not in phases)
        return (f"traced 的 trace 里没有{missing}的前向计算：请传上一格 ch03.traced_run() 的结果（它生成 {TRACE_NEW} 个 token，"
                "有预填充也有解码）。")
    if not all(isinstance(r.seconds, float) and math.isfinite(r.seconds) and 0 < r.seconds < 3600 for r in run.trace):
        return ("traced 里的耗时不像真实测量（每次前向计算都要花一点时间，不会是 0、负数或无穷）：请重新运行上一格，"
                "传 ch03.traced_run() 的结果。")
    return None


def grade_ttft_tpot(run, ttft_ms, tpot_ms, itl_median_ms=None) -> Verdict:
    """Graded against what kvlab measured for this request: ``time_to_first_token``, ``time_per_output_token``
    (a mean) and the median of ``decode_seconds``."""
    answers = (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("itl_median_ms", itl_median_ms))
    if all(v is None for _, v in answers):
        return checker.todo()
    if not isinstance(run, GenerationResult):
        return wrong("第一个参数要传上一格的 traced（ch03.traced_run() 的结果）。")
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
            f"只算了第一次预填充：提示词分成了 {len(prefill)} 块，TTFT 要把 {len(prefill)} 次预填充都加起来": prefill[0],
            "只算了最后一次预填充：前面几块也要算进去": prefill[-1],
            "多算了第一次解码：第一个新 token 在最后一次预填充之后就出来了": sum(prefill) + decode[0],
            "这是整个生成的总时间：TTFT 只到第一个新 token 为止": sum(every)})
    if tpot_ms is not None:
        problems["tpot_ms"] = _timing_problem("tpot_ms", tpot_ms, want_tpot, {
            "这是解码步的中位数，也就是 ITL 的中位数：TPOT 是平均值，（总时间 − TTFT）÷（新 token 数 − 1）": want_itl,
            f"分母多了 1：解码只有 {len(decode)} 步（第 1 个新 token 来自预填充），TPOT = 解码总时间 ÷（新 token 数 − 1）":
                sum(decode) / n_new,
            "把预填充也平均进来了：TPOT 只看解码步": sum(every) / len(every),
            f"这是总时间除以 {n_new} 个新 token（含预填充）：TPOT 先减去 TTFT，再除以 {n_new - 1}": sum(every) / n_new,
        })
    if itl_median_ms is not None:
        problems["itl_median_ms"] = _timing_problem("itl_median_ms", itl_median_ms, want_itl, {
            "这是解码步的平均值，也就是 TPOT：ITL 这里要的是中位数": want_tpot,
            "把预填充也算进来了：ITL 只看解码步之间的间隔": statistics.median(every),
        })
    bad = [f"{name}：{msg}" for name, msg in problems.items() if msg]
    missing = [n for n, v in answers if v is None]
    if bad:
        return wrong(f"{len(bad)} 处不对" + (f"，还有 {'、'.join(missing)} 没填" if missing else "") + "。", *bad)
    if missing:
        return checker.todo(f"填完的都对，还有 {'、'.join(missing)} 没填。")
    return right(f"正确！TTFT = {len(prefill)} 次预填充之和 = {want_ttft:.3f} ms；TPOT = {len(decode)} 个解码步的平均 = "
                 f"{want_tpot:.3f} ms；ITL 的中位数 = {want_itl:.3f} ms（TPOT 是它的 {want_tpot / want_itl:.2f} 倍："
                 + ("有几步特别慢，拉高了平均值）。" if want_tpot > 1.15 * want_itl else "这次各步耗时比较均匀）。"))


def check_ttft_tpot(run, ttft_ms, tpot_ms, itl_median_ms=None):
    return checker.check(TTFT_TPOT, grade_ttft_tpot, run, ttft_ms, tpot_ms, itl_median_ms)


EXERCISES = (BATCH_RIDGE, TTFT_TPOT)
