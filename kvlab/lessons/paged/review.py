"""Chapter 3.6's self-check: predictions on a given schedule or pool, every numeric answer key computed by kvlab
(kvlab.paging's block arithmetic, kvlab.serving's scheduler, the gather the cost section measures)."""
from __future__ import annotations

from ...config import ModelConfig
from ...model import ToyTransformer
from ...paging import DEFAULT_BLOCK_SIZE, blocks_for, paged_slots, shared_prefix_blocks
from ...questions import Choice, ChoiceQuestion, NumberQuestion
from ...serving import Request, ServeRun, serve
from .cost import gather_bytes

QUIZ_LENGTHS = (37, 16, 90, 5)
QUIZ_BLOCK = DEFAULT_BLOCK_SIZE
QUIZ_SYSTEM, QUIZ_REQUESTS, QUIZ_OWN = 70, 5, 30
QUIZ_GROWN = 100  # a sequence grows from 1 token to this many
QUIZ_WHOLE_SYSTEM = 64  # a system prompt of whole blocks: shared, never written, never copied
# (arrival step, prompt tokens, new tokens) per request
QUIZ_WAIT, QUIZ_WAIT_BATCH = ((0, 4, 6), (0, 4, 2), (1, 4, 2)), 2
QUIZ_FULL, QUIZ_FULL_BATCH, QUIZ_FULL_BLOCKS, QUIZ_FULL_BLOCK = ((0, 4, 8), (0, 4, 8)), 2, 4, 4
# the gather of one paged decode step: a model's shape, K/V in float32, B sequences of L tokens writing one more
QUIZ_GATHER_MODEL = ModelConfig(vocab_size=64, d_model=128, n_layer=4, n_head=4, n_kv_head=2)
QUIZ_GATHER_B, QUIZ_GATHER_L, QUIZ_GATHER_BYTES = 4, 100, 4


def schedule(policy: str, plan, max_batch: int, num_blocks: int | None = None, block_size: int = 4) -> ServeRun:
    """``plan`` ((arrival step, prompt tokens, new tokens) per request) served by kvlab.serving under ``policy``. The
    step clock depends only on these lengths, never on the weights: a tiny random model serves it in milliseconds."""
    model = ToyTransformer(ModelConfig(vocab_size=16, d_model=16, n_layer=1, n_head=2, max_seq_len=64), seed=0).eval()
    requests = [Request(rid, arrival, tuple(range(1, prompt + 1)), new)
                for rid, (arrival, prompt, new) in enumerate(plan)]
    return serve(model, requests, policy, max_batch=max_batch, num_blocks=num_blocks, block_size=block_size,
                 share_prefixes=False)  # every prompt is 1, 2, 3, ...: the questions are about batching alone


def _plan_text(plan) -> str:
    return "；".join(f"请求 {rid} 在第 {arrival} 步到达，提示词 {prompt} 个 token，要生成 {new} 个"
                    for rid, (arrival, prompt, new) in enumerate(plan))


def _preemption(run: ServeRun) -> tuple[int, int, int]:
    """The first preemption: (its step, the request preempted, the step that prefilled it again)."""
    first = next(s for s in run.steps if s.preempted)
    victim = first.preempted[0]
    again = next(s.step for s in run.steps if s.step > first.step and victim in s.prefilled)
    return first.step, victim, again


def review_questions() -> list:
    C = Choice
    lengths, bs = QUIZ_LENGTHS, QUIZ_BLOCK
    blocks = sum(blocks_for(n, bs) for n in lengths)
    shared = shared_prefix_blocks(QUIZ_SYSTEM, [QUIZ_SYSTEM + QUIZ_OWN] * QUIZ_REQUESTS, bs)
    empty = {n: paged_slots([n], bs) - n for n in range(1, QUIZ_GROWN + 1)}  # empty slots at each length
    whole = shared_prefix_blocks(QUIZ_WHOLE_SYSTEM, [QUIZ_WHOLE_SYSTEM + QUIZ_OWN] * QUIZ_REQUESTS, bs)
    static = schedule("static", QUIZ_WAIT, QUIZ_WAIT_BATCH)
    continuous = schedule("continuous", QUIZ_WAIT, QUIZ_WAIT_BATCH)
    full = schedule("continuous", QUIZ_FULL, QUIZ_FULL_BATCH, QUIZ_FULL_BLOCKS, QUIZ_FULL_BLOCK)
    preempted_at, victim, again = _preemption(full)
    written = QUIZ_FULL[0][1] + preempted_at - 1  # the position the decode pass of that step writes
    B, L, m = QUIZ_GATHER_B, QUIZ_GATHER_L, QUIZ_GATHER_MODEL
    gathered = gather_bytes(m, B, L, bs, QUIZ_GATHER_BYTES)
    return [
        ChoiceQuestion("3.6", "块表是 [7, 2, 5]，每块 4 个 token。这条序列的第 9 个 token（从 0 数）存在哪里？", (
            C("块 5 的第 1 格", True, "9 // 4 = 2：块表的第 2 项是物理块 5；9 % 4 = 1：块里的第 1 格。"),
            C("块 2 的第 1 格", False, "2 是块表里的位置（第几块），要再用它查块表：block_table[2] = 5。"),
            C("块 9 的第 0 格", False, "token 的位置不是块号：先整除块大小，再查块表。"),
            C("块 7 的第 9 格", False, "一块只有 4 格：第 9 个 token 已经在第 3 块（下标 2）里了。"))),
        NumberQuestion("3.6", f"{len(lengths)} 条序列分别有 {'、'.join(map(str, lengths))} 个 token，分页缓存每块 {bs} 个 "
                              "token。一共要多少块？", blocks, "块",
                       "每条各自向上取整：" + " + ".join(f"⌈{n}/{bs}⌉" for n in lengths) + f" = {blocks} 块"
                       f"（{paged_slots(lengths, bs)} 个槽位存 {sum(lengths)} 个 token）。",
                       "每条序列单独算 ⌈n / 块大小⌉，再加起来。"),
        NumberQuestion("3.6", f"一条序列从 1 个 token 一直长到 {QUIZ_GROWN} 个 token，分页缓存每块 {bs} 个 token。这期间它的"
                              "块里最多同时空着多少个 token 槽位？", max(empty.values()), "个",
                       "只有最后一块可能没写满。每次取一块新的块时（长度 "
                       + "、".join([str(n) for n, e in empty.items() if e == max(empty.values())][:6])
                       + f"……），新块只用了 1 格：空着 {bs} − 1 = {max(empty.values())} 个。所以分页时一条序列"
                       "最多浪费块大小 − 1 个槽位，和它多长无关；按最长长度填充或按固定长度预留时，浪费却随长度差变大。",
                       "想一想：什么时候要取一块新的块？那时新块里用了几格？"),
        NumberQuestion("3.6", f"{QUIZ_REQUESTS} 个请求都以同一段 {QUIZ_SYSTEM} 个 token 的系统提示词开头，各自还有 "
                              f"{QUIZ_OWN} 个 token，每块 {bs} 个 token。按本章的做法共享系统提示词（整块只存一份，"
                              "半满的那块写之前复制），一共省下多少块？", shared.saved, "块",
                       f"系统提示词装满 {QUIZ_SYSTEM} // {bs} = {shared.full_shared_blocks} 整块，其余 "
                       f"{QUIZ_REQUESTS - 1} 个请求各省这么多：{shared.saved} 块；半满的那块被复制了 {shared.copies} 次，"
                       "不算省下。",
                       "只数装满系统提示词的整块；第一个请求自己也要存一份。"),
        NumberQuestion("3.6", f"换一段恰好 {QUIZ_WHOLE_SYSTEM} 个 token 的系统提示词：{QUIZ_REQUESTS} 个请求都以它开头，各自还有 "
                              f"{QUIZ_OWN} 个 token，每块 {bs} 个 token，同样按本章的做法共享。写时复制（copy-on-write）"
                              "一共发生几次？", whole.copies, "次",
                       f"{QUIZ_WHOLE_SYSTEM} = {whole.full_shared_blocks} × {bs}：系统提示词恰好装满 {whole.full_shared_blocks} "
                       "整块，没有半满的块。每个请求自己的第一个 token 写进一块新取的、只属于它的块；被几条序列共享（引用计数大于 1）"
                       f"的块从来没有被写，所以不用复制。上一题 {QUIZ_SYSTEM} 个 token 的系统提示词最后一块半满，后来的 "
                       f"{QUIZ_REQUESTS - 1} 个请求往里写之前各复制一次：{shared.copies} 次。",
                       "写时复制只发生在一个共享的块要被写入之前。这段系统提示词会留下半满的块吗？"),
        NumberQuestion("3.6", f"批次最多 {QUIZ_WAIT_BATCH} 条序列，块池足够大。{_plan_text(QUIZ_WAIT)}。每一步：这一步加入的"
                              "请求各做一次预填充（得到第一个 token），批次里之前预填充过的序列各解码 1 个 token。用静态批处理，"
                              "请求 2 的首 token 延迟是几步（从它到达的那一步数起，含给出第一个 token 的那一步）？",
                       static.outcomes[2].ttft_steps, "步",
                       f"静态批处理要等整批都结束才换下一批：请求 0 到第 {static.outcomes[0].finished} 步才写完，请求 2 "
                       f"第 {static.outcomes[2].first_token} 步才加入并得到第一个 token，首 token 延迟 "
                       f"{static.outcomes[2].ttft_steps} 步。连续批处理在每一步的边界都让写完的序列离开、等待的请求加入："
                       f"请求 1 第 {continuous.outcomes[1].finished} 步写完，请求 2 第 {continuous.outcomes[2].first_token} 步"
                       f"就加入，首 token 延迟只有 {continuous.outcomes[2].ttft_steps} 步。每个请求生成的 token 两种调度都一样："
                       "变的是什么时候算，不是算出什么。",
                       "静态批处理里，新请求什么时候才能加入？先数清请求 0 哪一步写完。"),
        NumberQuestion("3.6", f"块池只有 {QUIZ_FULL_BLOCKS} 块，每块 {QUIZ_FULL_BLOCK} 个 token，批次最多 {QUIZ_FULL_BATCH} "
                              f"条序列。{_plan_text(QUIZ_FULL)}。用连续批处理：第 0 步预填充写入提示词，之后每一步每条序列写入 "
                              "1 个 token；块不够时，调度器抢占最晚到达的请求。第几步（从 0 数）第一次有请求被抢占？",
                       preempted_at, "步",
                       f"第 {preempted_at} 步，两条序列都要写位置 {written} 的 token（从 0 数），{written} // {QUIZ_FULL_BLOCK} "
                       f"= {written // QUIZ_FULL_BLOCK}：各需要下标 {written // QUIZ_FULL_BLOCK} 的一块新块，而 {QUIZ_FULL_BLOCKS} 块都被占着。调度器抢占最晚到达的请求 {victim}：归还它的块，"
                       f"它回到等待队列，第 {again} 步重新预填充（已经生成的 token 保留，重新算出的 K/V 和原来一样）。"
                       "最早的请求永远不会被抢占，所以每个请求都会完成（不会饿死）；调度器既不报错退出，也不覆盖别的序列的块。",
                       f"每条序列的第 p 个 token（从 0 数）写在它的第 p // {QUIZ_FULL_BLOCK} 块。数一数两条序列什么时候"
                       "各要一块新的，那时池里还剩几块。"),
        NumberQuestion("3.6", f"在本章的纯 PyTorch 实现里，分页缓存解码一步之前，要把每一层这一步要读的 K 和 V 按块表"
                              "收集（gather）成连续的张量，整块整块地拷贝（块里空着的格也拷）。一个模型有 "
                              f"{m.n_layer} 层、{m.n_kv_head} 个 KV 头、头维度 {m.head_dim}，每个数 {QUIZ_GATHER_BYTES} 字节；"
                              f"B = {B} 条序列各已有 {L} 个 token，这一步写入第 {L + 1} 个；每块 {bs} 个 token。"
                              "这一步一共拷贝多少 KiB？", gathered / 1024, "KiB",
                       f"每条序列要读 {L + 1} 个 token，占 ⌈{L + 1}/{bs}⌉ = {blocks_for(L + 1, bs)} 块 = "
                       f"{blocks_for(L + 1, bs) * bs} 个槽位。K 和 V 两份 × {m.n_layer} 层 × {B} 条 × "
                       f"{blocks_for(L + 1, bs) * bs} 个槽位 × {m.n_kv_head} 个头 × {m.head_dim} 维 × {QUIZ_GATHER_BYTES} 字节"
                       f" = {gathered:,} 字节 = {gathered / 1024:g} KiB。连续缓存的 K/V 本来就挨在一起，不用这次拷贝：这就是"
                       "第 6 节量的分页多出的时间的一部分（还有准备块表索引）。vLLM 的 PagedAttention 内核在注意力内部直接按块表"
                       "读各块，不做这次拷贝。",
                       "先算每条序列占几块（向上取整），整块都要拷；再乘 K 和 V 两份、层数、序列数、KV 头数、头维度和每个数的字节数。"),
    ]
