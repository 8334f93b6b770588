"""What chapter 3.6's code cells print, and the prompts its first look feeds the demo model, in both languages.

The notebook's code cells hold no prose: each printed line, check description and title comes from :data:`CELLS`
(``lesson.say(key, **fields)``), so the English edition runs the same cells with ``kvlab.set_language("en")``.
:data:`PROMPTS` holds the first look's three prompts in each demo model's language. The English ones were chosen on
the English demo model (``load_demo_model(lang="en")``) to play the Chinese ones' parts: 4, 18 and 2 tokens (the
Chinese 4, 22 and 2), the short one the long one's start, each continued sensibly by the corpus's own sentences."""
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

say = CELLS.say
