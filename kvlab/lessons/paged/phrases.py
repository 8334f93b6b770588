"""What chapter 3.6's code cells print, and the prompts its first look feeds the demo model, in both languages.

The notebook's code cells hold no prose: each printed line, check description and title comes from :data:`CELLS`
(``lesson.say(key, **fields)``), so the English edition runs the same cells with ``kvlab.set_language("en")``.
:data:`PROMPTS` holds the first look's three prompts in each demo model's language. The English ones were chosen on
the English demo model (``load_demo_model(lang="en")``) to play the Chinese ones' parts: 4, 18 and 2 tokens (the
Chinese 4, 22 and 2), the short one the long one's start, each continued sensibly by the corpus's own sentences.

The lesson's own words are here too, each looked up when it is shown: :data:`PANELS` (the panels' controls, readouts
and the animation's events, the first look's table and the exhausted pool) and :data:`REVIEW` (the self-check). The
figures' words are :data:`kvlab.viz.paged_plots.PLOTS`'s."""
from __future__ import annotations

from ...phrases import Phrasebook

CELLS = Phrasebook("paged.cells", {
    "zh": {
        # setup
        "device": "运行设备：{device}",
        "model": "演示模型：{layers} 层，{heads} 个查询头，{kv_heads} 个 KV 头，头维度 {head_dim}，"
                 "最长 {max_len} 个 token（{dtype}）",
        # 1. the paged cache next to the contiguous one
        "identical": "完全相同",
        "different": "不同",
        "vs_contiguous": "与连续的 KVCache 相比：token {tokens}，logits 最多差 {diff:.1e}",
        "prefill_passes": "预填充：{passes} 次前向计算，各喂入 {tokens} 个 token（每个提示词按自己的长度）",
        "pool_use": "块池 {pool} 块，每块 {block_size} 个 token：用了 {used} 块 = {slots} 个槽位，"
                    "存着 {stored} 个 token；连续的 KVCache 分配了 {contiguous} 个槽位（B × 最长一行，含左填充）",
        # 2. the animated run (lesson.animation_readout)
        "animation": "{steps} 步，{requests} 个请求；抢占 {preemptions} 次：{where}",
        "preempted_at": "第 {step} 步抢占请求 {requests}",
        "preempted_sep": "；",
        "request_sep": "、",
        "reused_title": "被另一个请求重新用上的块（前 {shown} 次）：",
        "reused": "  块 {block}：第 {step} 步从请求 {before} 转给请求 {after}",
        # 3. waste of three schemes
        "scheme_waste": "{name}：平均占 {mean:,.0f} 个槽位，最多 {peak:,}，空着 {share:.1%}",
        "tokens_held": "真正存着的 token：平均 {mean:,.0f} 个",
        # 4. shared prefixes
        "sharing_blocks": "不共享：{plain} 块；共享：{shared} 块（省下 {saved} 块），写时复制 {copies} 次",
        "sharing_prefill": "预填充喂入的 token：不共享 {plain} 个，共享 {shared} 个",
        "sharing_tokens": "生成的 token {tokens}，logits 最多差 {diff:.1e}",
        # the serving engine's own sharing
        "served_requests": "{requests} 个请求，系统提示词 {system} 个 token = {blocks} 整块（每块 {block_size} 个 token）",
        "served_peak": "最多占用的块：不共享 {plain} 块，共享 {shared} 块（省下 {saved} 块）",
        "served_prefill": "预填充喂入的 token：不共享 {plain} 个，共享 {shared} 个"
                          "（{cached} 个在共享的块里找到，不用再算）",
        "check_same_tokens": "每个请求生成的 token 和不共享时一字不差",
        "check_same_schedule": "调度一步一步相同：首 token 都在到达的那一步",
        "check_found_system": "第一个请求之后，每个请求都找到了系统提示词的全部整块",
        "check_fed_less": "少喂的 token = 在共享的块里找到的 token",
        "check_blocks_saved": "省下的块 = 后来的每个请求各省下系统提示词的整块",
        # self-check
        "quiz_title": "3.6 自测",
    },
    "en": {
        "device": "Running on: {device}",
        "model": "Demo model: {layers} layers, {heads} query heads, {kv_heads} KV heads, head dim {head_dim}, "
                 "at most {max_len} tokens ({dtype})",
        "identical": "identical",
        "different": "different",
        "vs_contiguous": "Against the contiguous KVCache: tokens {tokens}, logits differ by at most {diff:.1e}",
        "prefill_passes": "Prefill: {passes} forward passes, feeding {tokens} tokens (each prompt at its own length)",
        "pool_use": "Block pool of {pool} blocks, {block_size} tokens each: {used} blocks in use = {slots} slots "
                    "holding {stored} tokens; the contiguous KVCache allocated {contiguous} slots "
                    "(B × the longest row, left padding included)",
        "animation": "{steps} steps, {requests} requests; preemptions: {preemptions} ({where})",
        "preempted_at": "step {step}: request {requests}",
        "preempted_sep": "; ",
        "request_sep": ", ",
        "reused_title": "Blocks taken over by another request (first {shown}):",
        "reused": "  block {block}: from request {before} to request {after} at step {step}",
        "scheme_waste": "{name}: {mean:,.0f} slots on average, {peak:,} at most, {share:.1%} empty",
        "tokens_held": "Tokens actually held: {mean:,.0f} on average",
        "sharing_blocks": "Without sharing: {plain} blocks; with sharing: {shared} blocks ({saved} saved); "
                          "copy-on-write copies: {copies}",
        "sharing_prefill": "Tokens fed to prefill: {plain} without sharing, {shared} with sharing",
        "sharing_tokens": "Generated tokens: {tokens}; logits differ by at most {diff:.1e}",
        "served_requests": "{requests} requests; the system prompt is {system} tokens = {blocks} whole blocks "
                           "({block_size} tokens per block)",
        "served_peak": "Peak blocks in use: {plain} without sharing, {shared} with sharing ({saved} saved)",
        "served_prefill": "Tokens fed to prefill: {plain} without sharing, {shared} with sharing "
                          "({cached} found in shared blocks and not computed again)",
        "check_same_tokens": "every request generates exactly the tokens it generates without sharing",
        "check_same_schedule": "the schedule is the same step for step: every first token comes in the arrival step",
        "check_found_system": "after the first request, every request finds all the system prompt's whole blocks",
        "check_fed_less": "tokens no longer fed = tokens found in shared blocks",
        "check_blocks_saved": "blocks saved = the system prompt's whole blocks, once for each later request",
        "quiz_title": "3.6 Self-check",
    },
})

PROMPTS = Phrasebook("paged.prompts", {
    "zh": {
        "first_short": "人工智能",
        "first_long": "人工智能模型处理一个请求，通常分为两个阶段：",
        "first_tiny": "计算",
    },
    "en": {
        "first_short": "An artificial intelligence",
        "first_long": "An artificial intelligence model usually handles a request in two phases.",
        "first_tiny": "A token",
    },
})

# The lesson's own readouts, panels and controls (kvlab.lessons.paged's basics, runs and panels), looked up when they are
# shown. A key ending in ``_one`` is the singular English needs for a count of 1 (the Chinese is the same text).
PANELS = Phrasebook("paged.panels", {
    "zh": {
        # controls
        "label.step": "步",
        "label.block_size": "块大小（token）",
        "label.reserve": "每个请求预留（token）",
        "label.prefix": "共享的系统提示词（token）",
        "label.requests": "请求数",
        # the first look and the exhausted pool
        "texts_table": "<table><tr><th>提示词</th><th>分页缓存生成的文字</th><th>缓存里的 token</th><th>块表</th></tr>"
                       "{rows}</table>",
        "exhausted_intro": "错误信息原文是英文的，大意是：块池里的空闲块不够这一步用，这一步什么都没有写入。",
        "exhausted_after": "出错之后：各行存着 {lengths} 个 token，{used} 块在用、{free} 块空闲（共 {pool} 块）；"
                           "每个块要么空闲、要么只属于一张块表：{consistent}",
        "yes": "是",
        "no": "<b>否</b>",
        # the block-table animation
        "request": "请求 {rid}",
        "event.arrived": "{names} 到达",
        "event.prefilled": "{names} 加入批次（预填充）",
        "event.decoded": "{n} 条序列各解码 1 个 token",
        "event.decoded_one": "{n} 条序列各解码 1 个 token",
        "event.preempted": "{names} 被抢占（没有空闲块：它的块全部归还，回到等待队列）",
        "event.finished": "{names} 结束，块归还",
        "sep": "；",
        "nothing_running": "没有请求在跑",
        "table": "请求 {rid} → {blocks}（{tokens} 个 token）",
        "table_one": "请求 {rid} → {blocks}（{tokens} 个 token）",
        "no_free": "无",
        "no_tables": "（空）",
        "no_waiting": "空",
        "step_html": "<b>第 {step} 步</b>：{events}。<br>块表：{tables}<br>空闲列表（左边的先分出去）：{free}；"
                     "等待队列：{waiting}",
        # waste of three schemes
        "waste_html": "<table><tr><th>存法</th><th>平均占用（token 槽位）</th><th>最多占用</th><th>最多占用的字节</th>"
                      "<th>空着的比例</th></tr>{rows}</table>真正存着的 token 平均 {mean:,.0f} 个；字节按演示模型每个 token "
                      "{per_token}（K 和 V，所有层）计。{cut}",
        "waste_cut": "<br>⚠ 有 {cut} 个请求最长时超过每个请求预留的 {reserve} 个 token：按 3.5 的固定预留，它们会被截断或拒绝"
                     "（上面只按预留的长度计它们的槽位，这些槽位都算写满，超出的 token 不计）。",
        "waste_cut_one": "<br>⚠ 有 {cut} 个请求最长时超过每个请求预留的 {reserve} 个 token：按 3.5 的固定预留，它们会被截断或拒绝"
                         "（上面只按预留的长度计它们的槽位，这些槽位都算写满，超出的 token 不计）。",
        # shared prefixes
        "sharing_html": "{requests} 个请求，每个 {tokens} 个 token（系统提示词 {prefix} + 问题 {question} + 回答 "
                        "{answer} − 1）：不共享 <b>{unshared}</b> 块，共享 <b>{shared}</b> 块，省下 {saved} 块"
                        "（{share:.0%}）。{why}",
        "sharing_html_one": "{requests} 个请求，每个 {tokens} 个 token（系统提示词 {prefix} + 问题 {question} + 回答 "
                            "{answer} − 1）：不共享 <b>{unshared}</b> 块，共享 <b>{shared}</b> 块，省下 {saved} 块"
                            "（{share:.0%}）。{why}",
        "sharing_none": "系统提示词只有 {prefix} 个 token，填不满一整块（{block_size} 个 token）：没有可以共享的整块，"
                        "每个请求各存一份。",
        "sharing_copied": "前 {full} 块装满了系统提示词，{requests} 个请求共用（引用计数 {requests}）；第 {nth} 块"
                          "（块表里的位置 {full}）只装了系统提示词的最后 {rest} 个 token，也先共享，"
                          "但每个后来的请求要往里写自己的第一个 token：写之前先复制一份（写时复制，共 {copies} 次）。",
        "sharing_whole": "系统提示词恰好是 {full} 整块，{requests} 个请求共用；各自的 token 从新块开始写，不需要复制。",
        # a single request: nothing to share, whatever the prompt's length (review: 40 tokens "exactly whole blocks")
        "sharing_single_whole": "系统提示词恰好装满 {full} 整块，但只有一个请求，没有别的请求和它共用：这些块只归它自己"
                                "（引用计数 1），省不下块，也不需要复制。",
        "sharing_single_whole_one": "系统提示词恰好装满 {full} 整块，但只有一个请求，没有别的请求和它共用：这些块只归它自己"
                                    "（引用计数 1），省不下块，也不需要复制。",
        "sharing_single_part": "系统提示词装满 {full} 整块，第 {nth} 块还装着它的最后 {rest} 个 token，请求自己的 "
                               "token 接着写在这一块里；只有一个请求，没有别的请求和它共用：这些块只归它自己"
                               "（引用计数 1），省不下块，也不需要复制。",
        "sharing_single_part_one": "系统提示词装满 {full} 整块，第 {nth} 块还装着它的最后 {rest} 个 token，请求自己"
                                   "的 token 接着写在这一块里；只有一个请求，没有别的请求和它共用：这些块只归它"
                                   "自己（引用计数 1），省不下块，也不需要复制。",
        # static against continuous batching: the measured numbers
        "row.throughput": "吞吐（token/s，每一步取最快的一轮）",
        "row.ttft_mean": "TTFT 平均（ms）",
        "row.ttft_tail": "TTFT 90% 分位（ms）",
        "row.ttft_steps": "TTFT 平均（步）",
        "row.tpot": "TPOT 平均（ms）",
        "row.itl": "ITL 中位数 / 90% 分位（ms）",
        "row.batch": "一次解码平均几条序列",
        "row.steps": "一共几步",
        "row.peak_blocks": "最多占用的块",
        "row.preemptions": "被抢占的次数",
        # an ordinal number (English: 1st, 2nd, 3rd, 4th ...; ordinal() picks the key)
        "ordinal.st": "{n}",
        "ordinal.nd": "{n}",
        "ordinal.rd": "{n}",
        "ordinal.th": "{n}",
    },
    "en": {
        "label.step": "Step",
        "label.block_size": "Block size (tokens)",
        "label.reserve": "Reserved per request (tokens)",
        "label.prefix": "Shared system prompt (tokens)",
        "label.requests": "Requests",
        "texts_table": "<table><tr><th>Prompt</th><th>Text generated with the paged cache</th>"
                       "<th>Tokens in the cache</th><th>Block table</th></tr>{rows}</table>",
        "exhausted_intro": "The block pool has too few free blocks for this step, so the step wrote nothing:",
        "exhausted_after": "After the error the rows hold {lengths} tokens; {used} blocks are in use and {free} free "
                           "({pool} in all). Is every block either free or in exactly one block table? {consistent}",
        "yes": "yes",
        "no": "<b>no</b>",
        "request": "request {rid}",
        "event.arrived": "{names} arrived",
        "event.prefilled": "{names} joined the batch (prefill)",
        "event.decoded": "{n} sequences decoded 1 token each",
        "event.decoded_one": "{n} sequence decoded 1 token",
        "event.preempted": "{names} preempted (no free block: its blocks all go back to the pool and it returns to "
                           "the waiting queue)",
        "event.finished": "{names} finished, blocks returned",
        "sep": "; ",
        "nothing_running": "no request is running",
        "table": "request {rid} → {blocks} ({tokens} tokens)",
        "table_one": "request {rid} → {blocks} ({tokens} token)",
        "no_free": "none",
        "no_tables": "(empty)",
        "no_waiting": "empty",
        "step_html": "<b>Step {step}</b>: {events}.<br>Block tables: {tables}<br>Free list (the leftmost is handed out "
                     "first): {free}; waiting queue: {waiting}",
        "waste_html": "<table><tr><th>Scheme</th><th>Mean held (token slots)</th><th>Peak held</th><th>Peak bytes</th>"
                      "<th>Empty share</th></tr>{rows}</table>Tokens actually held: {mean:,.0f} on average. Bytes are "
                      "counted at the demo model's {per_token} per token (K and V, all layers).{cut}",
        "waste_cut": "<br>⚠ {cut} requests grow longer than the {reserve} tokens reserved per request: under 3.5's "
                     "fixed reservation they would be cut off or refused (the table counts only their reserved "
                     "slots, every one of them full, and none of the tokens beyond).",
        "waste_cut_one": "<br>⚠ {cut} request grows longer than the {reserve} tokens reserved per request: under 3.5's "
                         "fixed reservation it would be cut off or refused (the table counts only its reserved slots, "
                         "every one of them full, and none of the tokens beyond).",
        "sharing_html": "{requests} requests of {tokens} tokens each (system prompt {prefix} + question {question} + "
                        "answer {answer} − 1): <b>{unshared}</b> blocks without sharing, <b>{shared}</b> with sharing, "
                        "{saved} saved ({share:.0%}). {why}",
        "sharing_html_one": "{requests} request of {tokens} tokens (system prompt {prefix} + question {question} + "
                            "answer {answer} − 1): <b>{unshared}</b> blocks without sharing, <b>{shared}</b> with "
                            "sharing, {saved} saved ({share:.0%}). {why}",
        "sharing_none": "The system prompt is shorter than one block ({prefix} of {block_size} tokens): there is no "
                        "whole block to share, so each request stores its own copy.",
        "sharing_copied": "Whole blocks filled by the system prompt: {full}, shared by all {requests} requests "
                          "(reference count {requests}). The {nth} block (position {full} in the block table) holds "
                          "only the last {rest} of the prompt's tokens. It starts out shared too, but each later "
                          "request has to write its own first token into it, so each of them first makes its own copy "
                          "of the block (copy-on-write copies: {copies}).",
        "sharing_whole": "The system prompt ends exactly on a block boundary (whole blocks: {full}), and all "
                         "{requests} requests share it; each request writes its own tokens from a fresh block, so "
                         "nothing is copied.",
        "sharing_single_whole": "The system prompt fills exactly {full} whole blocks, but with a single request there "
                                "is no one to share them with: the request holds them alone (reference count 1), so "
                                "nothing is saved and nothing is copied.",
        "sharing_single_whole_one": "The system prompt fills exactly {full} whole block, but with a single request "
                                    "there is no one to share it with: the request holds it alone (reference count 1), "
                                    "so nothing is saved and nothing is copied.",
        "sharing_single_part": "The system prompt fills {full} whole blocks, and the {nth} block holds the last {rest} "
                               "of its tokens, followed by the request's own; with a single request there is no one to "
                               "share the whole blocks with: the request holds them alone (reference count 1), so "
                               "nothing is saved and nothing is copied.",
        "sharing_single_part_one": "The system prompt fills {full} whole block, and the {nth} block holds the last "
                                   "{rest} of its tokens, followed by the request's own; with a single request there is no one to "
                                   "share the whole block with: the request holds it alone (reference count 1), so "
                                   "nothing is saved and nothing is copied.",
        "row.throughput": "Throughput (tokens/s, each step at its fastest round)",
        "row.ttft_mean": "TTFT, mean (ms)",
        "row.ttft_tail": "TTFT, 90th percentile (ms)",
        "row.ttft_steps": "TTFT, mean (steps)",
        "row.tpot": "TPOT, mean (ms)",
        "row.itl": "ITL, median / 90th percentile (ms)",
        "row.batch": "Sequences per decode pass, mean",
        "row.steps": "Steps in all",
        "row.peak_blocks": "Peak blocks in use",
        "row.preemptions": "Preemptions",
        "ordinal.st": "{n}st",
        "ordinal.nd": "{n}nd",
        "ordinal.rd": "{n}rd",
        "ordinal.th": "{n}th",
    },
})


# The self-check (kvlab.lessons.paged.review): questions, choices, explanations, hints and the units beside the answer
# box, asked when the quiz is made. Every number in them is a field the review computes.
REVIEW = Phrasebook("paged.review", {
    "zh": {
        "list_sep": "、",
        "plan_sep": "；",
        "plan_item": "请求 {rid} 在第 {arrival} 步到达，提示词 {prompt} 个 token，要生成 {new} 个",
        "unit.blocks": "块",
        "unit.slots": "个",
        "unit.copies": "次",
        "unit.steps": "步",
        "unit.step": "步",
        # 1. a block-table lookup
        "table_q": "块表是 [7, 2, 5]，每块 4 个 token。这条序列的第 9 个 token（从 0 数）存在哪里？",
        "table_right": "块 5 的第 1 格",
        "table_right_why": "9 // 4 = 2：块表的第 2 项是物理块 5；9 % 4 = 1：块里的第 1 格。",
        "table_logical": "块 2 的第 1 格",
        "table_logical_why": "2 是块表里的位置（第几块），要再用它查块表：block_table[2] = 5。",
        "table_position": "块 9 的第 0 格",
        "table_position_why": "token 的位置不是块号：先整除块大小，再查块表。",
        "table_overflow": "块 7 的第 9 格",
        "table_overflow_why": "一块只有 4 格：第 9 个 token 已经在第 3 块（下标 2）里了。",
        # 2. blocks of a few sequences
        "count_q": "{n} 条序列分别有 {lengths} 个 token，分页缓存每块 {block_size} 个 token。一共要多少块？",
        "count_why": "每条各自向上取整：{sum} = {blocks} 块（{slots} 个槽位存 {tokens} 个 token）。",
        "count_hint": "每条序列单独算 ⌈n / 块大小⌉，再加起来。",
        # 3. the empty tail of a growing sequence
        "tail_q": "一条序列从 1 个 token 一直长到 {grown} 个 token，分页缓存每块 {block_size} 个 token。这期间它的"
                  "块里最多同时空着多少个 token 槽位？",
        "tail_why": "只有最后一块可能没写满。每次取一块新的块时（长度 {lengths}……），新块只用了 1 格：空着 "
                    "{block_size} − 1 = {most} 个。所以分页时一条序列最多浪费块大小 − 1 个槽位，和它多长无关；"
                    "按最长长度填充或按固定长度预留时，浪费却随长度差变大。",
        "tail_hint": "想一想：什么时候要取一块新的块？那时新块里用了几格？",
        # 4. blocks a shared system prompt saves
        "saved_q": "{requests} 个请求都以同一段 {system} 个 token 的系统提示词开头，各自还有 {own} 个 token，每块 "
                   "{block_size} 个 token。按本章的做法共享系统提示词（整块只存一份，半满的那块写之前复制），一共省下多少块？",
        "saved_why": "系统提示词装满 {system} // {block_size} = {full} 整块，其余 {others} 个请求各省这么多：{saved} 块；"
                     "半满的那块被复制了 {copies} 次，不算省下。",
        "saved_hint": "只数装满系统提示词的整块；第一个请求自己也要存一份。",
        # 5. copy-on-write of a prompt of whole blocks
        "copies_q": "换一段恰好 {whole} 个 token 的系统提示词：{requests} 个请求都以它开头，各自还有 {own} 个 token，"
                    "每块 {block_size} 个 token，同样按本章的做法共享。写时复制（copy-on-write）一共发生几次？",
        "copies_why": "{whole} = {full} × {block_size}：系统提示词恰好装满 {full} 整块，没有半满的块。每个请求自己的"
                      "第一个 token 写进一块新取的、只属于它的块；被几条序列共享（引用计数大于 1）的块从来没有被写，"
                      "所以不用复制。上一题 {system} 个 token 的系统提示词最后一块半满，后来的 {others} 个请求往里写之前"
                      "各复制一次：{copies} 次。",
        "copies_hint": "写时复制只发生在一个共享的块要被写入之前。这段系统提示词会留下半满的块吗？",
        # 6. waiting under static batching
        "wait_q": "批次最多 {batch} 条序列，块池足够大。{plan}。每一步：这一步加入的请求各做一次预填充（得到第一个 token），"
                  "批次里之前预填充过的序列各解码 1 个 token。用静态批处理，请求 2 的首 token 延迟是几步"
                  "（从它到达的那一步数起，含给出第一个 token 的那一步）？",
        "wait_why": "静态批处理要等整批都结束才换下一批：请求 0 到第 {static_end} 步才写完，请求 2 第 {static_first} 步"
                    "才加入并得到第一个 token，首 token 延迟 {static_ttft} 步。连续批处理在每一步的边界都让写完的序列离开、"
                    "等待的请求加入：请求 1 第 {cont_end} 步写完，请求 2 第 {cont_first} 步就加入，首 token 延迟只有 "
                    "{cont_ttft} 步。每个请求生成的 token 两种调度都一样：变的是什么时候算，不是算出什么。",
        "wait_hint": "静态批处理里，新请求什么时候才能加入？先数清请求 0 哪一步写完。",
        # 7. a pool that runs out: preemption
        "preempt_q": "块池只有 {blocks} 块，每块 {block_size} 个 token，批次最多 {batch} 条序列。{plan}。用连续批处理："
                     "第 0 步预填充写入提示词，之后每一步每条序列写入 1 个 token；块不够时，调度器抢占最晚到达的请求。"
                     "第几步（从 0 数）第一次有请求被抢占？",
        "preempt_why": "第 {step} 步，两条序列都要写位置 {position} 的 token（从 0 数），{position} // {block_size} "
                       "= {index}：各需要下标 {index} 的一块新块，而 {blocks} 块都被占着。调度器抢占最晚到达的请求 "
                       "{victim}：归还它的块，它回到等待队列，第 {again} 步重新预填充（已经生成的 token 保留，重新算出的 "
                       "K/V 和原来一样）。最早的请求永远不会被抢占，所以每个请求都会完成（不会饿死）；调度器既不报错退出，"
                       "也不覆盖别的序列的块。",
        "preempt_hint": "每条序列的第 p 个 token（从 0 数）写在它的第 p // {block_size} 块。数一数两条序列什么时候"
                        "各要一块新的，那时池里还剩几块。",
        # 8. the bytes one paged decode step gathers
        "gather_q": "在本章的纯 PyTorch 实现里，分页缓存解码一步之前，要把每一层这一步要读的 K 和 V 按块表"
                    "收集（gather）成连续的张量，整块整块地拷贝（块里空着的格也拷）。一个模型有 {layers} 层、"
                    "{kv_heads} 个 KV 头、头维度 {head_dim}，每个数 {nbytes} 字节；B = {batch} 条序列各已有 {length} "
                    "个 token，这一步写入第 {next} 个；每块 {block_size} 个 token。这一步一共拷贝多少 KiB？",
        "gather_why": "每条序列要读 {next} 个 token，占 ⌈{next}/{block_size}⌉ = {blocks} 块 = {slots} 个槽位。K 和 V "
                      "两份 × {layers} 层 × {batch} 条 × {slots} 个槽位 × {kv_heads} 个头 × {head_dim} 维 × {nbytes} 字节"
                      " = {bytes:,} 字节 = {kib:g} KiB。连续缓存的 K/V 本来就挨在一起，不用这次拷贝：这就是"
                      "第 6 节量的分页多出的时间的一部分（还有准备块表索引）。vLLM 的 PagedAttention 内核在注意力内部直接按块表"
                      "读各块，不做这次拷贝。",
        "gather_hint": "先算每条序列占几块（向上取整），整块都要拷；再乘 K 和 V 两份、层数、序列数、KV 头数、头维度和每个数的字节数。",
    },
    "en": {
        "list_sep": ", ",
        "plan_sep": "; ",
        "plan_item": "request {rid} arrives at step {arrival} with a {prompt}-token prompt and asks for {new} new "
                     "tokens",
        "unit.blocks": "blocks",
        "unit.slots": "slots",
        "unit.copies": "copies",
        "unit.steps": "steps",
        "unit.step": "step number",
        "table_q": "A sequence's block table is [7, 2, 5], with 4 tokens per block. Where is its token 9 (counting "
                   "from 0) stored?",
        "table_right": "Block 5, slot 1",
        "table_right_why": "9 // 4 = 2: entry 2 of the block table is physical block 5; 9 % 4 = 1: slot 1 of that "
                           "block.",
        "table_logical": "Block 2, slot 1",
        "table_logical_why": "2 is a position in the block table (the sequence's third block); look it up in the "
                             "table: block_table[2] = 5.",
        "table_position": "Block 9, slot 0",
        "table_position_why": "A token's position is not a block id: divide by the block size first, then look the "
                              "result up in the block table.",
        "table_overflow": "Block 7, slot 9",
        "table_overflow_why": "A block has only 4 slots: token 9 is already in the third block (index 2).",
        "count_q": "{n} sequences hold {lengths} tokens. With {block_size} tokens per block, how many blocks does the "
                   "paged cache need in all?",
        "count_why": "Round each sequence up on its own: {sum} = {blocks} blocks ({slots} slots holding {tokens} "
                     "tokens).",
        "count_hint": "Work out ⌈n / block size⌉ for each sequence separately, then add them up.",
        "tail_q": "A sequence grows from 1 token to {grown} tokens in a paged cache with {block_size} tokens per "
                  "block. Along the way, at most how many token slots in its blocks are empty at the same time?",
        "tail_why": "Only the last block can be partly empty. Each time the sequence takes a new block (at lengths "
                    "{lengths}, …), the new block uses just 1 slot, leaving {block_size} − 1 = {most} empty. So with "
                    "paging a sequence wastes at most block size − 1 slots, however long it grows; padding to the "
                    "longest or reserving a fixed length wastes more the more the lengths differ.",
        "tail_hint": "When does the sequence need a new block, and how many of that block's slots are in use at that "
                     "moment?",
        "saved_q": "{requests} requests all start with the same {system}-token system prompt, followed by {own} tokens "
                   "of their own, with {block_size} tokens per block. If the system prompt is shared the way this "
                   "chapter does it (whole blocks stored once, the part-filled block copied before it is written), "
                   "how many blocks are saved in all?",
        "saved_why": "The system prompt fills {system} // {block_size} = {full} whole blocks, and each of the other "
                     "{others} requests saves that many: {saved} blocks. The part-filled block was copied {copies} "
                     "times, so it saves nothing.",
        "saved_hint": "Count only the whole blocks the system prompt fills; the first request still stores its own "
                      "copy.",
        "copies_q": "Now take a system prompt of exactly {whole} tokens: {requests} requests all start with it, each "
                    "followed by {own} tokens of its own, with {block_size} tokens per block, shared the same way. "
                    "How many copy-on-write copies are made in all?",
        "copies_why": "{whole} = {full} × {block_size}: the system prompt fills exactly {full} whole blocks and leaves "
                      "no part-filled block. Each request writes its own first token into a fresh block that only it "
                      "holds; a block shared by several sequences (reference count above 1) is never written, so "
                      "nothing is copied. In the previous question the {system}-token system prompt left its last "
                      "block part-filled, and each of the {others} later requests copied it before writing into it: "
                      "{copies} copies.",
        "copies_hint": "Copy-on-write happens only just before a shared block is written. Does this system prompt "
                       "leave a part-filled block?",
        "wait_q": "A batch holds at most {batch} sequences and the block pool is large enough. The requests: {plan}. "
                  "In each step, every request that joins the batch runs one prefill (which gives its first token), "
                  "and every sequence already prefilled decodes 1 token. Under static batching, what is request 2's "
                  "time to first token in steps, counting from the step it arrives in and including the step that "
                  "gives its first token?",
        "wait_why": "Static batching starts the next batch only when the whole batch has finished: request 0 finishes "
                    "only at step {static_end}, so request 2 joins, and gets its first token, at step {static_first}: "
                    "a time to first token of {static_ttft} steps. Continuous batching lets finished sequences leave "
                    "and waiting requests join at every step boundary: request 1 finishes at step {cont_end}, "
                    "request 2 joins at step {cont_first}, and its time to first token is only {cont_ttft} steps. "
                    "Each request generates the same tokens under both schedules: what changes is when they are "
                    "computed, not what.",
        "wait_hint": "Under static batching, when can a new request join? First work out the step at which request 0 "
                     "finishes.",
        "preempt_q": "The block pool has only {blocks} blocks of {block_size} tokens, and a batch holds at most "
                     "{batch} sequences. The requests: {plan}. Under continuous batching, step 0's prefill writes the "
                     "prompts, and after that each sequence writes 1 token per step; when blocks run short, the "
                     "scheduler preempts the request that arrived last. At which step (counting from 0) is a request "
                     "preempted for the first time?",
        "preempt_why": "At step {step} both sequences must write the token at position {position} (counting from 0), "
                       "and {position} // {block_size} = {index}: each needs a new block at index {index}, while all "
                       "{blocks} blocks are taken. The scheduler preempts request {victim}, the one that arrived "
                       "last: its blocks go back to the pool, it returns to the waiting queue, and at step {again} it "
                       "is prefilled again (the tokens it already generated are kept, and the recomputed K/V equal "
                       "the originals). The earliest request is never preempted, so every request finishes (none "
                       "starves); the scheduler neither stops with an error nor overwrites another sequence's blocks.",
        "preempt_hint": "Token p of a sequence (counting from 0) goes into its block p // {block_size}. Work out when "
                        "both sequences need a new block, and how many blocks the pool has left at that point.",
        "gather_q": "In this chapter's pure-PyTorch implementation, before each decode step the paged cache gathers "
                    "the K and V that every layer reads in that step into contiguous tensors, following the block "
                    "tables and copying whole blocks (empty slots included). A model has {layers} layers, {kv_heads} "
                    "KV heads and a head dim of {head_dim}, with {nbytes} bytes per number; B = {batch} sequences "
                    "hold {length} tokens each, and this step writes one more (making {next}); blocks hold "
                    "{block_size} tokens. How many KiB does this step copy in all?",
        "gather_why": "Each sequence reads {next} tokens, which take ⌈{next}/{block_size}⌉ = {blocks} blocks = {slots} "
                      "slots. K and V (2) × {layers} layers × {batch} sequences × {slots} slots × {kv_heads} heads × "
                      "{head_dim} dims × {nbytes} bytes = {bytes:,} bytes = {kib:g} KiB. A contiguous cache's K/V "
                      "already sit side by side and need no such copy: this is part of the extra time paging took in "
                      "section 6 (preparing the block-table indices is another part). vLLM's PagedAttention kernel "
                      "reads the blocks through the block table inside attention and makes no such copy.",
        "gather_hint": "First count the blocks each sequence takes (round up): whole blocks are copied. Then multiply "
                       "by 2 (K and V), the layers, the sequences, the KV heads, the head dim and the bytes per number.",
    },
})


def counted(key: str, n: int, book: Phrasebook = PANELS, /, **fields) -> str:
    """``key``'s phrase in ``book`` for the count ``n``: ``key + "_one"`` when ``n`` is 1 (English's singular)."""
    return book.say(f"{key}_one" if n == 1 else key, **fields)


def ordinal(n: int) -> str:
    """``n`` as an ordinal in the course's language: 3 (Chinese, which writes 「第 3 块」), 3rd (English)."""
    tail = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return PANELS.say(f"ordinal.{tail}", n=n)

say = CELLS.say
