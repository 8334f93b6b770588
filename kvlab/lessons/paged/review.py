"""Chapter 3.6's self-check: every numeric answer key computed by kvlab.paging."""
from __future__ import annotations

from ...paging import blocks_for, paged_slots, shared_prefix_blocks
from ...questions import Choice, ChoiceQuestion, NumberQuestion

QUIZ_LENGTHS = (37, 16, 90, 5)
QUIZ_BLOCK = 16
QUIZ_SYSTEM, QUIZ_REQUESTS, QUIZ_OWN = 70, 5, 30


def review_questions() -> list:
    C = Choice
    lengths, bs = QUIZ_LENGTHS, QUIZ_BLOCK
    blocks = sum(blocks_for(n, bs) for n in lengths)
    shared = shared_prefix_blocks(QUIZ_SYSTEM, [QUIZ_SYSTEM + QUIZ_OWN] * QUIZ_REQUESTS, bs)
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
        ChoiceQuestion("3.6", "分页时，一条序列最多浪费多少个 token 槽位？", (
            C("块大小 − 1 个", True, "只有最后一块可能没满；其余每块都是满的。"),
            C("一半的槽位", False, "那更像按固定长度预留时的情形；分页只在最后一块里留空。"),
            C("0 个", False, "最后一块通常没满：除非序列长度恰好是块大小的整数倍。"))),
        NumberQuestion("3.6", f"{QUIZ_REQUESTS} 个请求都以同一段 {QUIZ_SYSTEM} 个 token 的系统提示词开头，各自还有 "
                              f"{QUIZ_OWN} 个 token，每块 {bs} 个 token。按本章的做法共享系统提示词（整块只存一份，"
                              "半满的那块写之前复制），一共省下多少块？", shared.saved, "块",
                       f"系统提示词装满 {QUIZ_SYSTEM} // {bs} = {shared.full_shared_blocks} 整块，其余 "
                       f"{QUIZ_REQUESTS - 1} 个请求各省这么多：{shared.saved} 块；半满的那块被复制了 {shared.copies} 次，"
                       "不算省下。",
                       "只数装满系统提示词的整块；第一个请求自己也要存一份。"),
        ChoiceQuestion("3.6", "写时复制（copy-on-write）什么时候发生？", (
            C("一个被几条序列共享（引用计数大于 1）的块要被其中一条写入之前", True,
              "写之前先复制一份给写的那条序列，其他序列读到的内容不变。"),
            C("每一步解码时所有块都复制一次", False, "那样分页就没有意义了：只有共享的块被写时才复制。"),
            C("一条序列结束时", False, "结束时块只是减少一个引用，引用计数到 0 才回到空闲列表。"))),
        ChoiceQuestion("3.6", "和静态批处理相比，连续批处理改变了什么？", (
            C("每一步的边界都可以让结束的序列离开、等待的请求加入", True,
              "所以后到的请求不必等整批最长的那条写完：首 token 延迟的尾部短得多，批次也更满。"),
            C("每个请求生成的 token 不同", False, "贪心解码下每个请求的输出和它单独生成时一样：变的是什么时候算，不是算出什么。"),
            C("每次前向计算只算一条序列", False, "恰恰相反：它让每次解码前向都尽量多算几条序列。"))),
        ChoiceQuestion("3.6", "块池里没有空闲块了，而一条正在生成的序列需要新块。本章的调度器怎么做？", (
            C("抢占最晚到达的请求：归还它的块，让它回到等待队列，之后重新预填充", True,
              "最早的请求永远不会被抢占，所以每个请求都会完成（不会饿死）；重新预填充得到的 token 和原来一样。"),
            C("报错退出", False, "那会让整个服务停下来：调度器应当让出内存，而不是崩溃。"),
            C("覆盖别的序列的块", False, "那会悄悄算错别的序列：块只有引用计数为 0 时才能重新分配。"))),
        ChoiceQuestion("3.6", "在本章的纯 PyTorch 实现里，分页缓存的一步解码为什么比连续缓存慢一点？", (
            C("每一步要先按块表找到各块，把它们的 K/V 收集（gather）到一起才能算注意力：多了准备索引和拷贝这些活", True,
              "第 6 节单独量了收集本身占多出的时间的几成。vLLM 的 PagedAttention 内核在注意力内部直接按块表读各块，"
              "不做这次拷贝。"),
            C("分页缓存存的 token 更多", False, "存的 token 一样多：分页只是把它们放在不连续的块里。"),
            C("分页缓存的精度更低", False, "精度完全一样：生成的 token 相同，logits 只差浮点舍入。"))),
    ]
