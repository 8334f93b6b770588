"""Exercises of chapter 3.3: which of two runs is memory-bound, from their arithmetic intensity and this machine's
measured ridge point; TTFT and TPOT read from a trace. Uses only kvlab's core (``measure``, ``costs``,
``generate``), not the chapter's lesson module."""
from __future__ import annotations

import html
import math
import statistics
from dataclasses import dataclass

from ..config import ModelConfig
from ..costs import pass_cost
from ..generation import GenerationResult, generate
from ..measure import measure_matmul_flops, measure_read_bandwidth, measurement_threads, torch_threads
from . import checker
from .checker import Exercise, Verdict, right, wrong
from .tools import demo

NOTEBOOK = "03_prefill_and_decode.ipynb"
SETUP = """from IPython.display import display

from kvlab.costs import pass_cost
from kvlab.exercises import ch03"""

# == 1. memory-bound or compute-bound ======================================================================
# 8 layers, d_model 512, fp32 weights of about 114 MiB: far beyond a CPU's caches, so a decode step streams them
CONFIG = ModelConfig(vocab_size=4096, d_model=512, n_layer=8, n_head=8, d_ff=1408, max_seq_len=1024)
PROMPT = 256
RUNS = {"A": (f"预填充 {PROMPT} 个 token 的提示词", PROMPT, 0), "B": (f"缓存里已有 {PROMPT - 1} 个 token 时解码 1 个 token", 1, PROMPT - 1)}


@dataclass(frozen=True)
class Machine:
    """This machine's two roofs, measured: memory read bandwidth (bytes/s) and matmul rate (FLOP/s)."""

    bandwidth: float
    flops: float
    device: str

    def __str__(self) -> str:
        return (f"本机（{self.device}）：读带宽 {self.bandwidth / 1e9:.1f} GB/s（machine.bandwidth，字节/秒），"
                f"矩阵乘法 {self.flops / 1e9:.1f} GFLOP/s（machine.flops，FLOP/秒）")


def this_machine(device=None) -> Machine:
    """Measure both roofs now (best of a few runs, with the threads kvlab's timings use)."""
    from ..device import pick_device

    dev = pick_device() if device is None else device
    with torch_threads(measurement_threads()):
        bandwidth = measure_read_bandwidth(dev, nbytes=128 * 2**20, repeats=5)
        flops = measure_matmul_flops(dev, n=1024, repeats=3)
    return Machine(bandwidth.best, flops.best, str(dev))


ROOFLINE = Exercise(
    key="ch03.roofline",
    title="练习 1：哪一次运行受带宽限制",
    task=f"""一个 8 层、d_model = 512、权重为 FP32（约 114 MiB）的模型（`ch03.CONFIG`）做两次前向计算：

* 运行 A：{RUNS['A'][0]}，`pass_cost(ch03.CONFIG, {PROMPT})`；
* 运行 B：{RUNS['B'][0]}，`pass_cost(ch03.CONFIG, 1, {PROMPT - 1})`。

`pass_cost` 给出一次前向计算的浮点运算数 `.flops` 和读写的字节数 `.bytes`（权重读一遍，加上读写缓存）。下面的代码格先在你的机器上测出两个「屋顶」：读内存的带宽和矩阵乘法的算力。请填写：

* `ridge`：本机的脊点（FLOP/字节），即算力与带宽相交处的算术强度；
* `intensity_a`、`intensity_b`：两次运行的算术强度（FLOP/字节）；
* `memory_bound`：哪一次受带宽限制（算术强度低于脊点）？写 `"A"`、`"B"`、`"AB"`（两次都是）或 `""`（都不是）。

数字按这台机器上刚测出的结果检查，换一台机器答案可能不同。""",
    stub=f'''machine = ch03.this_machine()  # measured just now
print(machine)
run_a = pass_cost(ch03.CONFIG, {PROMPT})  # A: .flops, .bytes
run_b = pass_cost(ch03.CONFIG, 1, {PROMPT - 1})  # B
ridge = None  # FLOP per byte
intensity_a = None
intensity_b = None
memory_bound = None  # "A", "B", "AB" or ""''',
    check="ch03.check_roofline(machine, ridge, intensity_a, intensity_b, memory_bound)",
    hints=(
        "脊点 = 算力 ÷ 带宽 = machine.flops / machine.bandwidth，单位 FLOP/字节；算术强度 = run.flops / run.bytes。",
        "算术强度低于脊点的运行，搬运数据的时间比计算的时间长：它受带宽限制。",
    ),
)

REL = 0.01  # numbers the learner computes from the same measurements: 1 % covers rounding


def _number_problem(name: str, got, want: float, swaps: dict[float, str]) -> str | None:
    try:
        value = float(checker.parse_number(got, name))
    except checker.AnswerError as exc:
        return str(exc)
    if checker.close(value, want, REL):
        return None
    for other, message in swaps.items():
        if checker.close(value, other, REL):
            return message
    return f"不对：你写的是 {value:.4g}，按本机的测量算出来不是这个数"


def _bound_set(answer) -> set[str] | None:
    if not isinstance(answer, str):
        return None
    letters = answer.upper().replace(" ", "").replace(",", "").replace("，", "").replace("和", "")
    return set(letters) if set(letters) <= set(RUNS) else None


def grade_roofline(machine: Machine, ridge, intensity_a, intensity_b, memory_bound) -> Verdict:
    answers = {"ridge": ridge, "intensity_a": intensity_a, "intensity_b": intensity_b, "memory_bound": memory_bound}
    if all(v is None for v in answers.values()):
        return checker.todo()
    if not isinstance(machine, Machine):
        return wrong("第一个参数要传上一格测出的 machine（ch03.this_machine() 的结果）。")
    want_ridge = machine.flops / machine.bandwidth
    costs = {k: pass_cost(CONFIG, new, past) for k, (_, new, past) in RUNS.items()}
    problems = {}
    if ridge is not None:
        problems["ridge"] = _number_problem("ridge", ridge, want_ridge, {
            1 / want_ridge: "倒过来了：脊点 = 算力 ÷ 带宽（FLOP/秒 ÷ 字节/秒 = FLOP/字节）",
            want_ridge * 1e9: "单位不一致：算力和带宽要都用「每秒」的原始单位（FLOP/秒、字节/秒）",
            want_ridge / 1e9: "单位不一致：算力和带宽要都用「每秒」的原始单位（FLOP/秒、字节/秒）"})
    for key, got in (("A", intensity_a), ("B", intensity_b)):
        if got is None:
            continue
        c = costs[key]
        problems[f"intensity_{key.lower()}"] = _number_problem(f"intensity_{key.lower()}", got, c.intensity, {
            c.bytes / c.flops: "倒过来了：算术强度 = FLOP ÷ 字节",
            c.flops / c.weight_bytes: "字节数只算了权重：还要加上读写缓存的字节（用 run.bytes）"})
    if memory_bound is not None:
        chosen = _bound_set(memory_bound)
        truth = {k for k, c in costs.items() if c.intensity < want_ridge}
        if chosen is None:
            problems["memory_bound"] = f"memory_bound 要写 \"A\"、\"B\"、\"AB\" 或 \"\"，收到的是 {memory_bound!r}"
        elif chosen != truth:
            why = "；".join(f"运行 {k} 的强度 {c.intensity:.3g} FLOP/字节{'低于' if k in truth else '高于'}本机脊点 "
                           f"{want_ridge:.3g}，{'受带宽限制' if k in truth else '受算力限制'}" for k, c in costs.items())
            problems["memory_bound"] = f"判断错了：{why}"
    bad = [f"{name}：{msg}" for name, msg in problems.items() if msg]
    missing = [name for name, v in answers.items() if v is None]
    if bad:
        return wrong(f"{len(bad)} 处不对" + (f"，还有 {'、'.join(missing)} 没填" if missing else "") + "。", *bad)
    if missing:
        return checker.todo(f"填完的都对，还有 {'、'.join(missing)} 没填。")
    a, b = costs["A"].intensity, costs["B"].intensity
    return right(f"正确！本机脊点约 {want_ridge:.3g} FLOP/字节：预填充（A，{a:.3g} FLOP/字节）每读 1 字节权重做上百次运算，"
                 f"受算力限制；解码（B，{b:.2g} FLOP/字节）把全部权重读一遍只为 1 个 token，受带宽限制。")


def check_roofline(machine, ridge, intensity_a, intensity_b, memory_bound):
    return checker.check(ROOFLINE, grade_roofline, machine, ridge, intensity_a, intensity_b, memory_bound)


# == 2. TTFT and TPOT from a trace ==========================================================================
TRACE_PROMPT = "人工智能模型处理一个请求，通常分为两个阶段"
TRACE_CHUNK, TRACE_NEW = 8, 16

TTFT_TPOT = Exercise(
    key="ch03.ttft_tpot",
    title="练习 2：从 trace 读出 TTFT 和 TPOT",
    task=f"""下面的代码格用演示模型生成 {TRACE_NEW} 个 token，提示词分成每块 {TRACE_CHUNK} 个 token 预填充（`prefill_chunk_size={TRACE_CHUNK}`），并列出它的 trace：每次前向计算一行，`phase` 是阶段，`seconds` 是耗时。只用这张表（或 `traced.trace`），算出：

* `ttft_ms`：首 token 延迟（TTFT），毫秒：从开始到第一个新 token 出来用了多久；
* `tpot_ms`：每 token 延迟（TPOT），毫秒：之后每生成 1 个 token 的典型耗时（取解码步耗时的中位数）。

`traced.trace` 是一个列表，每个元素有 `.phase`（`"prefill"` 或 `"decode"`）和 `.seconds`。""",
    stub='''traced = ch03.traced_run()
display(ch03.trace_table(traced))
ttft_ms = None  # milliseconds
tpot_ms = None  # milliseconds''',
    check="ch03.check_ttft_tpot(traced, ttft_ms, tpot_ms)",
    hints=(
        "第一个新 token 是最后一次预填充算出来的：TTFT 要把所有预填充的前向计算加起来，不包括解码。",
        "TPOT 只看解码步：statistics.median(r.seconds for r in traced.trace if r.phase == \"decode\") × 1000。",
    ),
)


def traced_run() -> GenerationResult:
    """One generation on the demo model whose prompt is prefilled in chunks (after a warm-up run)."""
    model, tok = demo()
    ids = tok.encode(TRACE_PROMPT)
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
    return abs(got - want) <= max(REL * abs(want), 0.005)  # 0.005 ms: the table's 3 decimals


def _timing_problem(name: str, got, want: float, mistakes: dict[str, float]) -> str | None:
    try:
        value = float(checker.parse_number(got, name))
    except checker.AnswerError as exc:
        return str(exc)
    if _close_ms(value, want):
        return None
    if _close_ms(value * 1e3, want):
        return f"这是秒：{name} 要写毫秒（× 1000）"
    for message, other in mistakes.items():
        if _close_ms(value, other):
            return message
    return f"不对：你写的是 {value:.4g} ms"


def grade_ttft_tpot(run, ttft_ms, tpot_ms) -> Verdict:
    if ttft_ms is None and tpot_ms is None:
        return checker.todo()
    if not isinstance(run, GenerationResult):
        return wrong("第一个参数要传上一格的 traced（ch03.traced_run() 的结果）。")
    ms = lambda rs: [r.seconds * 1e3 for r in rs]  # noqa: E731
    prefill = ms(r for r in run.trace if r.phase == "prefill")
    decode = ms(r for r in run.trace if r.phase == "decode")
    every = prefill + decode
    want_ttft, want_tpot = sum(prefill), statistics.median(decode)
    problems = {}
    if ttft_ms is not None:
        problems["ttft_ms"] = _timing_problem("ttft_ms", ttft_ms, want_ttft, {
            f"只算了第一次预填充：提示词分成了 {len(prefill)} 块，TTFT 要把 {len(prefill)} 次预填充都加起来": prefill[0],
            "只算了最后一次预填充：前面几块也要算进去": prefill[-1],
            "多算了第一次解码：第一个新 token 在最后一次预填充之后就出来了": sum(prefill) + decode[0],
            "这是整个生成的总时间：TTFT 只到第一个新 token 为止": sum(every)})
    if tpot_ms is not None:
        problems["tpot_ms"] = _timing_problem("tpot_ms", tpot_ms, want_tpot, {
            "把预填充也算进来了：TPOT 只看解码步": statistics.median(every),
            "把预填充也平均进来了：TPOT 只看解码步": sum(every) / len(every),
            f"这是总时间除以 {run.new_tokens.shape[1]} 个新 token（含预填充）：TPOT 只看解码步": sum(every) / run.new_tokens.shape[1],
        })
        if problems["tpot_ms"] and _close_ms(float(tpot_ms), statistics.fmean(decode)) and not math.isclose(
                statistics.fmean(decode), want_tpot):
            problems["tpot_ms"] = None  # the mean of the decode steps is a fair TPOT too
    bad = [f"{name}：{msg}" for name, msg in problems.items() if msg]
    missing = [n for n, v in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms)) if v is None]
    if bad:
        return wrong(f"{len(bad)} 处不对" + (f"，还有 {'、'.join(missing)} 没填" if missing else "") + "。", *bad)
    if missing:
        return checker.todo(f"填完的都对，还有 {'、'.join(missing)} 没填。")
    return right(f"正确！TTFT = {len(prefill)} 次预填充之和 = {want_ttft:.3f} ms；TPOT = {len(decode)} 个解码步的中位数 "
                 f"= {want_tpot:.3f} ms（取平均值 {statistics.fmean(decode):.3f} ms 也算对）。")


def check_ttft_tpot(run, ttft_ms, tpot_ms):
    return checker.check(TTFT_TPOT, grade_ttft_tpot, run, ttft_ms, tpot_ms)


EXERCISES = (ROOFLINE, TTFT_TPOT)
