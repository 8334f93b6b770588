"""Exercises of chapter 3.6: write the block-table lookup and see it checked inside a real generation; count the
blocks a set of requests takes with and without a shared system prompt. Expected values come from
:mod:`kvlab.paging`; the generation runs on :class:`kvlab.paged_cache.PagedKVCache`."""
from __future__ import annotations

import random

import torch

from ..generation import generate
from ..language import get_language
from ..measure import leave_a_core
from ..paged_cache import BlockTable, PagedKVCache
from ..memory import stored_tokens
from ..paging import DEFAULT_BLOCK_SIZE, blocks_for, shared_prefix_blocks
from ..phrases import Phrasebook
from ..tokenizer import TOKENIZERS
from . import checker
from .checker import Exercise, ExerciseText, Verdict, right, wrong
from .tools import demo

NOTEBOOK = "06_paged_cache_and_batching.ipynb"
SETUP = """from kvlab.exercises import ch06"""

LOGIT_TOLERANCE = 1e-4  # a correct lookup matches the contiguous cache to about 1e-6
NEW_TOKENS = 12
# The lookup's generation: three prompts of unequal lengths (no padding anywhere) in each demo model's language:
# 4, 10 and 2 tokens on the Chinese model, 4, 12 and 2 on the English one.
LOOKUP_PROMPTS = Phrasebook("ch06.prompts", {
    "zh": {"short": "人工智能", "long": "大语言模型会把每个字", "tiny": "计算"},
    "en": {"short": "An artificial intelligence", "long": "A language model splits the text into tokens",
           "tiny": "A token"},
})
PROMPT_KEYS = ("short", "long", "tiny")
PROMPTS = tuple(LOOKUP_PROMPTS.text(key, "zh") for key in PROMPT_KEYS)  # the Chinese model's
BLOCK_SIZE = 4
SHUFFLE_SEED = 6  # the pool hands blocks out in a shuffled order, so a block's id is never its place in a table

# What the two graders say, in the course's language when they say it (the checker's own words are
# kvlab.exercises.phrases.CHECKER's).
FEEDBACK = Phrasebook("ch06.feedback", {
    "zh": {
        # 1. the block-table lookup
        "case": "block_table = {table}，position = {position}，block_size = {block_size}",
        "not_a_pair": "{case}：应返回 block 和 offset 两个数，得到的是 {got}",
        "logical": "你返回的是块表里的位置（第几块），不是物理块号：还要用它去 block_table 里查",
        "swapped": "block 和 offset 的顺序反了",
        "expected": "{case}：期望 {want}，得到 {got}",
        "expected_why": "{case}：期望 {want}，得到 {got}。{why}",
        "writing": "写入第 {position} 个 token",
        "outside": "第 {position} 个 token 查到了块 {block} 的第 {offset} 格，不在这条序列的块表 {table} 里",
        "lookup_todo": "block 和 offset 还是 None：写出它们，再运行这一格。",
        "differs_from": "单独的例子都对，但用它生成时从第 {step} 步起与连续的 KVCache 不同（logits 最多差 {diff:.2g}）："
                        "一定有别的位置查错了块。",
        "differs": "单独的例子都对，但用它生成时与连续的 KVCache 不同（logits 最多差 {diff:.2g}）：一定有别的位置查错了块。",
        "table_item": "「{prompt}」→ {blocks}",
        "table_sep": "；",
        "lookup_right": "正确！三个提示词用你的 lookup 各生成 {new} 个 token，与连续的 KVCache 一字不差，"
                        "logits 最多差 {diff:.1g}。它们的块表（打乱的块池）：{tables}。",
        # 2. how many blocks
        "floor": "向下取整了：每条序列最后那块即使不满也要占一整块（向上取整）。",
        "end_to_end": "这是把所有 token 连在一起算的块数：每条序列有自己的块，各自的最后一块都可能不满。",
        "half_saved": "你把系统提示词最后那个半满的块也算成省下了：它被每个后来的请求复制了一份（写时复制）。",
        "first_stores": "第一个请求自己也要存一份系统提示词：省下的是其余 {others} 个请求的那几块。",
        "fresh_block": "各自的 token 不是从新块开始的：它们接在系统提示词后面，先填满半满的那一块（复制出来的那份）。",
        "answer_wrong": "{name}：{message}",
        "answer_detail": "（{detail}）",
        "n_wrong": "{n} 处不对。",
        "n_wrong_one": "{n} 处不对。",
        "missing_sep": "、",
        "partly": "填了的都对，{missing} 还没填。",
        "blocks_right": "正确！不共享 {unshared} 块；共享后 {shared} 块：其余 {others} 个请求各省下 {full} 整块，"
                        "共省 {saved} 块，另有 {copies} 次写时复制。",
    },
    "en": {
        "case": "block_table = {table}, position = {position}, block_size = {block_size}",
        "not_a_pair": "{case}: should return two numbers, block and offset; got {got}",
        "logical": "You returned the position in the block table (which of the sequence's blocks), not the physical "
                   "block id: look that position up in block_table as well",
        "swapped": "Block and offset are the wrong way round",
        "expected": "{case}: expected {want}, got {got}",
        "expected_why": "{case}: expected {want}, got {got}. {why}",
        "writing": "writing token {position}",
        "outside": "token {position} was looked up at block {block}, slot {offset}, which is not in this sequence's "
                   "block table {table}",
        "lookup_todo": "block and offset are still None: fill them in, then run this cell again.",
        "differs_from": "Every single case is right, but generating with it departs from the contiguous KVCache from "
                        "step {step} on (logits differ by up to {diff:.2g}): some other position must look up the "
                        "wrong block.",
        "differs": "Every single case is right, but generating with it does not match the contiguous KVCache (logits "
                   "differ by up to {diff:.2g}): some other position must look up the wrong block.",
        "table_item": "\"{prompt}\" → {blocks}",
        "table_sep": "; ",
        "lookup_right": "Correct! With your lookup, each of the three prompts generates the same {new} tokens as with "
                        "the contiguous KVCache, with logits within {diff:.1g}. Their block tables (on a shuffled "
                        "pool): {tables}.",
        "floor": "You rounded down: a sequence's last block takes a whole block even when it is not full (round up).",
        "end_to_end": "That is the block count of all the tokens laid end to end: each sequence has blocks of its "
                      "own, and the last block of each may be partly empty.",
        "half_saved": "You counted the system prompt's last, part-filled block as saved too: each later request "
                      "copied it (copy-on-write).",
        "first_stores": "The first request still stores the system prompt itself: what is saved is those blocks of "
                        "the other {others} requests.",
        "fresh_block": "A request's own tokens do not start in a fresh block: they follow the system prompt and first "
                       "fill up the part-filled block (the copied one).",
        "answer_wrong": "{name}: {message}",
        "answer_detail": " ({detail})",
        "n_wrong": "{n} answers are wrong.",
        "n_wrong_one": "{n} answer is wrong.",
        "missing_sep": " and ",
        "partly": "the answer you filled in is right; {missing} is still None.",
        "blocks_right": "Correct! {unshared} blocks without sharing; {shared} with sharing: each of the other {others} "
                        "requests saves {full} whole blocks, {saved} in all, and {copies} blocks are copied on write.",
    },
})
say = FEEDBACK.say


def model_prompts(tokenizer) -> tuple[str, ...]:
    """The lookup's prompts in the language of the demo model ``tokenizer`` belongs to (else the course's)."""
    lang = next((code for code, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), None) or get_language()
    return tuple(LOOKUP_PROMPTS.text(key, lang) for key in PROMPT_KEYS)


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
    english=ExerciseText(
        title="Exercise 1: write the block-table lookup",
        task=f"""Where does a paged cache store token number `position` of a sequence (counting from 0)? The sequence's block table, `block_table`, lists in order the physical block ids the sequence uses, and each block holds `block_size` tokens.

Write `lookup` so that it returns `(block, offset)`: the **physical block id** that holds the token, and the token's place within that block (0 to `block_size − 1`). For example, with the block table `[7, 2, 5]` and 4 tokens per block, token 5 is in slot 1 of block 2.

The check first calls your function on its own with a few examples, then plugs it into a `PagedKVCache` (every write of a new token's K/V finds its slot through your `lookup`) and has the demo model use that cache to generate {NEW_TOKENS} tokens for each of three prompts of different lengths, comparing step by step against the contiguous `KVCache`. The pool hands out blocks in a shuffled order, so a block's physical id is not the same as its place in the table.""",
        hints=(
            "First work out which of the sequence's blocks holds the token (integer division), then look up that "
            "block's physical id in the block table.",
            "block = block_table[position // block_size], offset = position % block_size.",
        ),
    ),
)

LOOKUP_CASES = (([7, 2, 5], 0, 4), ([7, 2, 5], 5, 4), ([7, 2, 5], 11, 4), ([3, 0, 9], 17, 16), ([4], 0, 1))


def _expected(table, position, block_size) -> tuple[int, int]:
    return BlockTable(list(table)).slot(position, block_size)


def lookup_problem(lookup) -> str | None:
    """The first case the learner's ``lookup`` gets wrong, said in the course's language; None when every case is
    right."""
    for table, position, bs in LOOKUP_CASES:
        case = say("case", table=table, position=position, block_size=bs)
        got = checker.call(lookup, list(table), position, bs, case=case)
        want = _expected(table, position, bs)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            return say("not_a_pair", case=case, got=repr(got))
        if tuple(got) == want:
            continue
        why = ""
        if tuple(got) == (position // bs, position % bs):
            why = say("logical")
        elif tuple(got) == want[::-1]:
            why = say("swapped")
        if why:
            return say("expected_why", case=case, want=want, got=tuple(got), why=why)
        return say("expected", case=case, want=want, got=tuple(got))
    return None


def cache_with_lookup(lookup, config, batch_size: int, max_seq_len: int, dtype=None) -> PagedKVCache:
    """A ``PagedKVCache`` whose writes find their slots through the learner's ``lookup``, on a shuffled pool."""
    class LearnerCache(PagedKVCache):
        def slot_of(self, table, position):
            block, offset = checker.call(lookup, list(table.blocks), position, self.block_size,
                                         case=say("writing", position=position))
            if not (0 <= offset < self.block_size and block in table.blocks):
                raise checker.AnswerError(say("outside", position=position, block=block, offset=offset,
                                              table=table.blocks))
            return int(block) * self.block_size + int(offset)

    cache = LearnerCache(config, batch_size, max_seq_len, dtype=dtype, block_size=BLOCK_SIZE)
    random.Random(SHUFFLE_SEED).shuffle(cache.pool.free)
    return cache


@leave_a_core
def grade_lookup(lookup) -> Verdict:
    problem = checker.unwritten(lookup, LOOKUP_STUB, "lookup", say("lookup_todo"))
    if problem:
        return problem
    problem = checker.refuses_reference(lookup, {"slot": BlockTable.slot, "slot_of": PagedKVCache.slot_of})
    if problem:
        return problem
    problem = lookup_problem(lookup)
    if problem:
        return wrong(problem)
    model, tok = demo()
    texts = model_prompts(tok)
    prompts = [tok.encode(p) for p in texts]
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
        return wrong(say("differs_from", step=step, diff=diff) if step else say("differs", diff=diff))
    tables = say("table_sep").join(say("table_item", prompt=p, blocks=t.blocks) for p, t in zip(texts, cache.tables))
    return right(say("lookup_right", new=NEW_TOKENS, diff=diff, tables=tables))


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
    english=ExerciseText(
        title="Exercise 2: how many blocks do these requests need?",
        task=f"""The {len(OWN)} requests here all begin with the same {SYSTEM}-token system prompt, followed by each one's own question and answer, which add another {", ".join(map(str, OWN[:-1]))} and {OWN[-1]} tokens respectively (at their longest). The paged cache holds {COUNT_BLOCK} tokens per block.

* `without_sharing`: if every request stores its own copy, how many blocks do they need in total?
* `with_sharing`: if the system prompt is shared the way this chapter does it, how many blocks do they need in total? The whole blocks the system prompt fills are stored once and shared by all requests; the system prompt's last, part-filled block is shared at first too, but each later request copies it before writing its own first token (copy-on-write).""",
        hints=(
            "A sequence of n tokens takes ⌈n / block size⌉ blocks (rounded up): its last block may be partly empty.",
            f"With sharing, each later request saves only the {SYSTEM} // {COUNT_BLOCK} whole blocks the system prompt "
            "fills; the part-filled block is copied, so it saves nothing.",
        ),
    ),
)


def blocks_mistakes() -> dict[str, dict[int, str]]:
    lengths, bs, R = request_lengths(), COUNT_BLOCK, len(OWN)
    s = shared_prefix_blocks(SYSTEM, lengths, bs)
    floor_total = sum(n // bs for n in lengths)
    return {
        "without": {
            floor_total: say("floor"),
            blocks_for(sum(lengths), bs): say("end_to_end"),
        },
        "with": {
            s.unshared - (R - 1) * blocks_for(SYSTEM, bs): say("half_saved"),
            s.unshared - R * s.full_shared_blocks: say("first_stores", others=R - 1),
            blocks_for(SYSTEM, bs) + sum(blocks_for(n, bs) for n in OWN): say("fresh_block"),
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
    bad = [say("answer_wrong", name=n, message=v.message) + "".join(say("answer_detail", detail=d) for d in v.details)
           for n, v in parts.items() if v.status == checker.WRONG]
    if bad:
        return wrong(say("n_wrong_one" if len(bad) == 1 else "n_wrong", n=len(bad)), *bad)
    if missing:
        return checker.todo(say("partly", missing=say("missing_sep").join(missing)))
    return right(say("blocks_right", unshared=s.unshared, shared=s.shared, others=len(OWN) - 1,
                     full=s.full_shared_blocks, saved=s.saved, copies=s.copies))


def check_blocks(without_sharing, with_sharing):
    return checker.check(BLOCKS, grade_blocks, without_sharing, with_sharing)


EXERCISES = (LOOKUP, BLOCKS)
