"""Exercises of chapter 3.6: write the block-table lookup and see it checked inside a real generation; count the
blocks a set of requests takes with and without a shared system prompt. Expected values come from
:mod:`kvlab.paging`; the generation runs on :class:`kvlab.paged_cache.PagedKVCache`."""
from __future__ import annotations

import random

import torch

from ..generation import generate
from ..measure import leave_a_core
from ..paged_cache import BlockTable, PagedKVCache
from ..memory import stored_tokens
from ..paging import DEFAULT_BLOCK_SIZE, blocks_for, shared_prefix_blocks
from . import checker
from .checker import Exercise, Verdict, right, wrong
from .tools import demo

NOTEBOOK = "06_paged_cache_and_batching.ipynb"
SETUP = """from kvlab.exercises import ch06"""

LOGIT_TOLERANCE = 1e-4  # a correct lookup matches the contiguous cache to about 1e-6
NEW_TOKENS = 12
PROMPTS = ("人工智能", "大语言模型会把每个字", "计算")  # unequal lengths: no padding anywhere
BLOCK_SIZE = 4
SHUFFLE_SEED = 6  # the pool hands blocks out in a shuffled order, so a block's id is never its place in a table

# == 1. the block-table lookup ===============================================================================
LOOKUP_STUB = '''def lookup(block_table, position, block_size):
    # block_table: the physical block ids of one sequence, in order, e.g. [7, 2, 5]
    # position: which token of the sequence (0, 1, 2, ...); block_size: tokens per block
    block = None  # the physical block that holds this token
    offset = None  # where in that block (0 .. block_size - 1)
    return block, offset'''

LOOKUP = Exercise(
    key="ch06.lookup",
    title="练习 1：写出块表查找",
    task=f"""分页缓存里，一条序列的第 `position` 个 token（从 0 数）存在哪里？它的块表 `block_table` 按顺序列出这条序列用到的物理块号，每块存 `block_size` 个 token。

写出 `lookup`，返回 `(block, offset)`：存这个 token 的**物理块号**，和它在块里的位置（0 到 `block_size − 1`）。例如块表 `[7, 2, 5]`、每块 4 个 token 时，第 5 个 token 在块 2 的第 1 格。

检查程序先用几个例子单独调用它，再把它装进一个 `PagedKVCache`（每次写入新 token 的 K/V 都用你的 `lookup` 找位置），让演示模型用这个缓存为三个长短不一的提示词各生成 {NEW_TOKENS} 个 token，与连续的 `KVCache` 逐步比较。块池会打乱分配的顺序，所以物理块号和「第几块」不一样。""",
    stub=LOOKUP_STUB,
    check="ch06.check_lookup(lookup)",
    hints=(
        "先算这个 token 在第几块（整除），再去块表里查这一块的物理块号。",
        "block = block_table[position // block_size]，offset = position % block_size。",
    ),
)

LOOKUP_CASES = (([7, 2, 5], 0, 4), ([7, 2, 5], 5, 4), ([7, 2, 5], 11, 4), ([3, 0, 9], 17, 16), ([4], 0, 1))


def _expected(table, position, block_size) -> tuple[int, int]:
    return BlockTable(list(table)).slot(position, block_size)


def lookup_problem(lookup) -> str | None:
    """The first case the learner's ``lookup`` gets wrong, said in Chinese; None when every case is right."""
    for table, position, bs in LOOKUP_CASES:
        case = f"block_table = {table}，position = {position}，block_size = {bs}"
        got = checker.call(lookup, list(table), position, bs, case=case)
        want = _expected(table, position, bs)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            return f"{case}：应返回 block 和 offset 两个数，得到的是 {got!r}"
        if tuple(got) == want:
            continue
        why = ""
        if tuple(got) == (position // bs, position % bs):
            why = "你返回的是块表里的位置（第几块），不是物理块号：还要用它去 block_table 里查"
        elif tuple(got) == want[::-1]:
            why = "block 和 offset 的顺序反了"
        return f"{case}：期望 {want}，得到 {tuple(got)}" + (f"。{why}" if why else "")
    return None


def cache_with_lookup(lookup, config, batch_size: int, max_seq_len: int, dtype=None) -> PagedKVCache:
    """A ``PagedKVCache`` whose writes find their slots through the learner's ``lookup``, on a shuffled pool."""
    class LearnerCache(PagedKVCache):
        def slot_of(self, table, position):
            block, offset = checker.call(lookup, list(table.blocks), position, self.block_size,
                                         case=f"写入第 {position} 个 token")
            if not (0 <= offset < self.block_size and block in table.blocks):
                raise checker.AnswerError(f"第 {position} 个 token 查到了块 {block} 的第 {offset} 格，"
                                          f"不在这条序列的块表 {table.blocks} 里")
            return int(block) * self.block_size + int(offset)

    cache = LearnerCache(config, batch_size, max_seq_len, dtype=dtype, block_size=BLOCK_SIZE)
    random.Random(SHUFFLE_SEED).shuffle(cache.pool.free)
    return cache


@leave_a_core
def grade_lookup(lookup) -> Verdict:
    problem = checker.unwritten(lookup, LOOKUP_STUB, "lookup", "block 和 offset 还是 None：写出它们，再运行这一格。")
    if problem:
        return problem
    problem = checker.refuses_reference(lookup, {"slot": BlockTable.slot, "slot_of": PagedKVCache.slot_of})
    if problem:
        return problem
    problem = lookup_problem(lookup)
    if problem:
        return wrong(problem)
    model, tok = demo()
    prompts = [tok.encode(p) for p in PROMPTS]
    peak = stored_tokens(max(map(len, prompts)), NEW_TOKENS)
    cache = cache_with_lookup(lookup, model.config, len(prompts), peak, model.dtype)
    try:
        got = generate(model, prompts, NEW_TOKENS, cache=cache, return_logits=True)
    except checker.AnswerError as exc:
        return wrong(str(exc))
    ref = generate(model, prompts, NEW_TOKENS, cache="kv", return_logits=True)
    per_step = (got.logits - ref.logits).abs().amax(dim=(0, 2))  # [new tokens]: the largest difference per step
    diff = float(per_step.max())
    if not torch.equal(got.tokens, ref.tokens) or diff > LOGIT_TOLERANCE:
        step = int((per_step > LOGIT_TOLERANCE).nonzero()[0, 0]) + 1 if diff > LOGIT_TOLERANCE else None
        where = f"从第 {step} 步起" if step else ""
        return wrong(f"单独的例子都对，但用它生成时{where}与连续的 KVCache 不同（logits 最多差 {diff:.2g}）："
                     "一定有别的位置查错了块。")
    tables = "；".join(f"「{p}」→ {t.blocks}" for p, t in zip(PROMPTS, cache.tables))
    return right(f"正确！三个提示词用你的 lookup 各生成 {NEW_TOKENS} 个 token，与连续的 KVCache 一字不差，"
                 f"logits 最多差 {diff:.1g}。它们的块表（打乱的块池）：{tables}。")


def check_lookup(lookup):
    return checker.check(LOOKUP, grade_lookup, lookup)


# == 2. how many blocks ========================================================================================
SYSTEM, COUNT_BLOCK = 50, DEFAULT_BLOCK_SIZE
OWN = (30, 7, 45, 12, 26, 33)  # each request's own tokens (question + answer) after the system prompt


def request_lengths() -> list[int]:
    return [SYSTEM + n for n in OWN]


BLOCKS = Exercise(
    key="ch06.blocks",
    title="练习 2：这些请求要多少块",
    task=f"""{len(OWN)} 个请求都以同一段 {SYSTEM} 个 token 的系统提示词开头，后面是各自的问题和回答，分别还有 {", ".join(map(str, OWN))} 个 token（最长的时候）。分页缓存每块 {COUNT_BLOCK} 个 token。

* `without_sharing`：每个请求各存一份，一共要多少块？
* `with_sharing`：按本章的做法共享系统提示词：装满系统提示词的整块只存一份，所有请求共用；系统提示词最后那个没装满的块也先共享，但每个后来的请求写入自己的第一个 token 之前要把它复制一份（写时复制）。一共要多少块？""",
    stub='''without_sharing = None  # blocks
with_sharing = None''',
    check="ch06.check_blocks(without_sharing, with_sharing)",
    hints=(
        "一条 n 个 token 的序列要 ⌈n / 块大小⌉ 块（向上取整）：最后一块可以不满。",
        f"共享时，每个后来的请求省下的只是装满系统提示词的 {SYSTEM} // {COUNT_BLOCK} 整块；半满的那块被复制了，不算省下。",
    ),
)


def blocks_mistakes() -> dict[str, dict[int, str]]:
    lengths, bs, R = request_lengths(), COUNT_BLOCK, len(OWN)
    s = shared_prefix_blocks(SYSTEM, lengths, bs)
    floor_total = sum(n // bs for n in lengths)
    return {
        "without": {
            floor_total: "向下取整了：每条序列最后那块即使不满也要占一整块（向上取整）。",
            blocks_for(sum(lengths), bs): "这是把所有 token 连在一起算的块数：每条序列有自己的块，各自的最后一块都可能不满。",
        },
        "with": {
            s.unshared - (R - 1) * blocks_for(SYSTEM, bs): "你把系统提示词最后那个半满的块也算成省下了："
                                                           "它被每个后来的请求复制了一份（写时复制）。",
            s.unshared - R * s.full_shared_blocks: "第一个请求自己也要存一份系统提示词：省下的是其余 "
                                                   f"{R - 1} 个请求的那几块。",
            blocks_for(SYSTEM, bs) + sum(blocks_for(n, bs) for n in OWN): "各自的 token 不是从新块开始的："
                                                                           "它们接在系统提示词后面，先填满半满的那一块（复制出来的那份）。",
        },
    }


def grade_blocks(without_sharing, with_sharing) -> Verdict:
    if without_sharing is None and with_sharing is None:
        return checker.todo()
    s = shared_prefix_blocks(SYSTEM, request_lengths(), COUNT_BLOCK)
    known = blocks_mistakes()
    parts = {"without_sharing": checker.grade_count(without_sharing, s.unshared, known["without"]),
             "with_sharing": checker.grade_count(with_sharing, s.shared, known["with"])}
    missing = [n for n, v in parts.items() if v.status == checker.TODO]
    bad = [f"{n}：{v.message}" + "".join(f"（{d}）" for d in v.details)
           for n, v in parts.items() if v.status == checker.WRONG]
    if bad:
        return wrong(f"{len(bad)} 处不对。", *bad)
    if missing:
        return checker.todo(f"填了的都对，{'、'.join(missing)} 还没填。")
    return right(f"正确！不共享 {s.unshared} 块；共享后 {s.shared} 块：其余 {len(OWN) - 1} 个请求各省下 "
                 f"{s.full_shared_blocks} 整块，共省 {s.saved} 块，另有 {s.copies} 次写时复制。")


def check_blocks(without_sharing, with_sharing):
    return checker.check(BLOCKS, grade_blocks, without_sharing, with_sharing)


EXERCISES = (LOOKUP, BLOCKS)
