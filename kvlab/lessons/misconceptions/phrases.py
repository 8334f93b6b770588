"""What chapter 3.5's code cells print (``CELLS``) and the prompts they give the demo model (``PROMPTS``), in
both of the course's languages: the cells hold code only and read their text from here (issue 34)."""
from __future__ import annotations

from collections.abc import Mapping

from ...phrases import Phrasebook
from .common import DEFAULT_PROMPT


CELLS = Phrasebook("misconceptions.cells", {
    "zh": {
        # setup
        "device": "运行设备：{device}",
        "model": "演示模型：{cfg.n_layer} 层，{cfg.n_head} 个查询头，{cfg.n_kv_head} 个 KV 头，头维度 {cfg.head_dim}，"
                 "最长 {cfg.max_seq_len} 个 token，参数 {n_params:,} 个（{dtype}）",
        # misconception 1: the cache is not part of the parameters
        "cache_run": "提示词 {run.prompt_len:>3} 个 token，B = {run.batch_size}：S = {run.stored_tokens:>3}，"
                     "已写入 {run.final_bytes:>9,} B = {run.batch_size} × {run.stored_tokens} × {per_token:,} B"
                     "（分配 {run.allocated_bytes:,} B）；参数校验和 {run.before.checksum:.12} → {run.after.checksum:.12}",
        "weights_unchanged": "每次生成前后，参数的校验和完全相同（一个字节都没变）",
        "cache_bytes_formula": "缓存已写入的字节数 = B × S × 每个 token 的字节数",
        "allocated_is_written": "分配的字节数 = 写入的字节数（生成结束时恰好写满）",
        "no_shared_memory": "没有任何参数与缓存共用内存",
        "reset_empties": "reset() 之后缓存里是 0 个 token、0 字节",
        "same_weights_other_caches": "四次生成之后的权重是同一份，缓存的内容却各不相同",
        "params_summary": "参数：{n_params:,} 个，{n_bytes:,} B，state_dict 里 {n_tensors} 个张量，"
                          "四次生成前后校验和完全相同；缓存的内容每次都不同。",
        "sliders_max": "下面的滑块全拉到最右：{batch} 条序列 × {tokens} 个 token 的缓存是 {cache}，"
                       "比整个模型的权重（{weights}）还大",
        "sliders_max_beats_weights": "滑块拉到最右时，缓存比整个模型的权重还大",
        # misconception 2: caching K alone
        "same_text_three_ways": "三种方式生成的文字完全相同",
        "k_only_projects_all_v": "只缓存 K：每步只投影 1 个 token 的 K，V 却要投影全部 t 个 token",
        "k_only_v_like_none": "只缓存 K 每步投影的 V 和不缓存一样多",
        "kv_projects_one": "缓存 K 和 V：每步只投影新 token 的 K、V 各 1 个",
        "step_flops_header": "{counting}，演示模型 t = {t} 时一步的计算量：",
        "step_flops": "  {name}：{flops:,} FLOP",
        "step_flops_share": "  {name}：{flops:,} FLOP，无缓存的 {share:.2%}",
        "llama_shares": "LLaMA-7B 的形状，t = {t}：{shares}",
        "mode_share": "{name} {share:.2%}",
        "list_sep": "，",
        "minimal_note": "注：最省的只缓存 K（最后一层的旧 token 只算 V）也还要无缓存的 {share:.0%}"
                        "（LLaMA-7B 的形状 {llama_share:.0%}），是有缓存的 {times:,} 倍",
        "llama_shape_params": "这个形状的参数量正是 LLaMA-7B 的",
        "demo_k_only_over_95": "演示模型上，只缓存 K 仍要做无缓存 95% 以上的计算",
        "llama_k_only_about_92": "LLaMA-7B 的形状上约 92%（在 90% 到 95% 之间）",
        "minimal_k_only_share": "最省的只缓存 K（最后一层的旧 token 只算 V）：演示模型约 3/4，LLaMA-7B 约 90%",
        "minimal_still_100x": "即使这样，也比完整缓存多两个数量级以上的计算",
        "layer_change": "第 {layer} 层：K 变了 {k:.1%}，V 变了 {v:.1%}（各自相对 ‖K‖、‖V‖）",
        "layer0_unchanged": "第 0 层：V 只取决于这个 token，K 只取决于这个 token 和它的位置；改了第一个 token，两者都不变",
        "later_layers_change": "第 1 层起：K、V 都变了 30% 以上，它们取决于整个前缀",
        "query_check": "第 {qc.layer} 层，t = {qc.t}：最后一个 token 的输出变化 {qc.last_row_change:.1e}，"
                       "之前各行的输出变化 {qc.earlier_rows_change:.3g}（任一元素的最大绝对变化）",
        "last_row_unchanged": "最后一个 token 的输出一点没变：它只用自己的 Q，从不读旧 token 的 Q",
        "earlier_rows_changed": "之前各行的输出确实变了（它们用了被换掉的 Q，但早在前几步就算完了）",
        # misconception 3: a bigger cache is not better
        "fits_exactly": "刚好够用",
        "reserved_more": "多预留 {extra}",
        "reservation": "预留 {reserved:>3} 个 token（{why}）：分配 {allocated:>7,} B，真正写入 {used:,} B",
        "same_text_any_reserve": "预留多少都不改变生成的文字",
        "same_bytes_written": "也不改变真正写入的字节",
        "allocated_grows": "分配的字节随预留增加，最大的超过写入的 8 倍",
        "t4_plan": "T4：按 {usable:g} 规划 {budget}，FP16 的 LLaMA-7B 权重 {weights}，剩给缓存 {room}；"
                   "一条预留 2048 个 token 的序列要 {slot}：放得下 {capacity} 条",
        "t4_llama3": "T4 + Llama-3-8B：FP16 权重 {weights}，可用只有 {budget}",
        "spread": "{label}（{note}）：{description}",
        "t4_no_room": "T4 上留给缓存的空间放不下一条预留 2048 个 token 的序列",
        "llama3_weights_too_big": "Llama-3-8B 的 FP16 权重本身就放不进 T4（见 3.4）",
        "chat_mostly_short": "单轮问答：多数请求很短（中位数不到上下文的 1/4）……",
        "chat_few_long": "……少数很长（最长的超过中位数的 4 倍）",
        "long_doc_median": "长文档：中位数超过上下文的一半",
        "multi_turn_shorter": "多轮对话：多于一轮，每轮的中位数比单轮问答短",
        "reserve_row": "预留 {reserve:>4} 个 token：同时 {capacity:>2} 条序列，预留中闲置 {idle:.1%}，"
                       "{too_long:.1%} 的请求比预留长",
        "paged_row": "按需分页（每块 {page} 个 token）：平均约 {capacity:.1f} 条，一条都不截断",
        "full_reserve_fewest": "预留 2048 个 token 时同时放下的序列最少",
        "full_reserve_idle": "预留 2048：一条都不截断，但预留里约八成闲置",
        "short_reserve_truncates": "预留 256：序列多 8 倍，却有一半以上的请求被截断",
        "few_truncated": "只有预留 1024 和 2048 时，被截断的请求不到 10%",
        "paged_doubles": "按需分页放下的序列是其中最好的两倍以上",
        "panel_default_over_budget": "上面面板的默认设置要的比预算多，只收下了预留 2048 时放得下的条数",
        "no_free_memory": "{device} 不报告空闲内存，跳过这个演示。",
        # the lab
        "lab_all_ran": "五种有 bug 的缓存和一个正确的缓存都跑了",
        "lab_control_matches": "正确的缓存（对照）：token 和 logits 都与不用缓存相同",
        "every_bug_changes_text": "每一个 bug 都改变了生成的文字",
        "logits_before_text": "至少有一个 bug，logits 比文字更早偏离",
        # review and summary
        "quiz_title": "第 3 章自测",
        "summary_rows": "总结表有 9 行",
        "long_doc_less_idle": "长文档（请求接近上下文长度）的预留闲置得比多轮对话少……",
        "long_doc_less_paging_gain": "……分页带来的好处也比多轮对话小",
    },
    "en": {
        # setup
        "device": "Device: {device}",
        "model": "Demo model: {cfg.n_layer} layers, {cfg.n_head} query heads, {cfg.n_kv_head} KV heads, "
                 "head dim {cfg.head_dim}, up to {cfg.max_seq_len} tokens, {n_params:,} parameters ({dtype})",
        # misconception 1: the cache is not part of the parameters
        "cache_run": "Prompt of {run.prompt_len:>3} tokens, B = {run.batch_size}: S = {run.stored_tokens:>3}, "
                     "{run.final_bytes:>9,} B written = {run.batch_size} × {run.stored_tokens} × {per_token:,} B "
                     "({run.allocated_bytes:,} B allocated); parameter checksum {run.before.checksum:.12} → "
                     "{run.after.checksum:.12}",
        "weights_unchanged": "The parameters' checksum is the same before and after every generation "
                             "(not one byte changed)",
        "cache_bytes_formula": "Bytes written to the cache = B × S × bytes per token",
        "allocated_is_written": "Bytes allocated = bytes written (the cache is exactly full when generation ends)",
        "no_shared_memory": "No parameter shares memory with the cache",
        "reset_empties": "After reset() the cache holds 0 tokens and 0 bytes",
        "same_weights_other_caches": "After the four generations the weights are one and the same, "
                                     "while every cache holds something different",
        "params_summary": "Parameters: {n_params:,}, {n_bytes:,} B, {n_tensors} tensors in the state_dict; the "
                          "checksum is the same before and after all four generations, and the cache's contents "
                          "differ every time.",
        "sliders_max": "With the sliders below all the way to the right, the cache of {batch} sequences × {tokens} "
                       "tokens takes {cache}: more than all of the model's weights ({weights})",
        "sliders_max_beats_weights": "With the sliders all the way right, the cache outgrows the model's weights",
        # misconception 2: caching K alone
        "same_text_three_ways": "All three ways generate exactly the same text",
        "k_only_projects_all_v": "K-only cache: each step projects K for 1 token but V for all t tokens",
        "k_only_v_like_none": "A K-only cache projects as much V per step as no cache at all",
        "kv_projects_one": "Caching K and V: each step projects one K and one V, for the new token only",
        "step_flops_header": "{counting}; one step of the demo model at t = {t}:",
        "step_flops": "  {name}: {flops:,} FLOP",
        "step_flops_share": "  {name}: {flops:,} FLOP, {share:.2%} of no cache",
        "llama_shares": "LLaMA-7B's shape, t = {t}: {shares}",
        "mode_share": "{name} {share:.2%}",
        "list_sep": ", ",
        "minimal_note": "Note: even the leanest K-only cache (at the last layer, the old tokens get only their V "
                        "projection: no Q, attention or MLP) still "
                        "does {share:.0%} of the no-cache work ({llama_share:.0%} at LLaMA-7B's shape), "
                        "{times:,} times the work with a cache",
        "llama_shape_params": "This shape has exactly LLaMA-7B's parameter count",
        "demo_k_only_over_95": "On the demo model, a K-only cache still does over 95% of the no-cache work",
        "llama_k_only_about_92": "At LLaMA-7B's shape, about 92% (between 90% and 95%)",
        "minimal_k_only_share": "The leanest K-only cache (at the last layer, the old tokens get only their V "
                                "projection: no Q, attention or MLP): about 3/4 "
                                "on the demo model, about 90% at LLaMA-7B's shape",
        "minimal_still_100x": "Even that is over two orders of magnitude more work than a full cache",
        "layer_change": "Layer {layer}: K changed by {k:.1%}, V by {v:.1%} (relative to ‖K‖ and ‖V‖)",
        "layer0_unchanged": "Layer 0: V depends on this token alone, K on this token and its position; changing "
                            "the first token leaves both as they were",
        "later_layers_change": "From layer 1 on, K and V both change by more than 30%: they depend on the whole prefix",
        "query_check": "Layer {qc.layer}, t = {qc.t}: the last token's output changed by {qc.last_row_change:.1e}, "
                       "the earlier rows' output by {qc.earlier_rows_change:.3g} (the largest absolute change of "
                       "any element)",
        "last_row_unchanged": "The last token's output did not move at all: it uses only its own Q and never reads "
                              "the old tokens' Q",
        "earlier_rows_changed": "The earlier rows' outputs did change (they used the replaced Qs, but they were "
                                "computed steps ago)",
        # misconception 3: a bigger cache is not better
        "fits_exactly": "just enough",
        "reserved_more": "{extra} extra",
        "reservation": "Reserved {reserved:>3} tokens ({why}): {allocated:>7,} B allocated, {used:,} B actually written",
        "same_text_any_reserve": "However much is reserved, the generated text stays the same",
        "same_bytes_written": "So do the bytes actually written",
        "allocated_grows": "The bytes allocated grow with the reservation; the largest is over 8 times the bytes written",
        "t4_plan": "T4: planning for {usable:g} of it gives {budget}; LLaMA-7B's FP16 weights take {weights}, "
                   "leaving {room} for the cache; one sequence reserving 2048 tokens needs {slot}: {capacity} fit",
        "t4_llama3": "T4 + Llama-3-8B: the FP16 weights take {weights}, but only {budget} is usable",
        "spread": "{label} ({note}): {description}",
        "t4_no_room": "On a T4, the room left for the cache cannot hold one sequence reserving 2048 tokens",
        "llama3_weights_too_big": "Llama-3-8B's FP16 weights alone do not fit on a T4 (see 3.4)",
        "chat_mostly_short": "Single-turn Q&A: most requests are short (the median is under 1/4 of the context)…",
        "chat_few_long": "…and a few are long (the longest is over 4 times the median)",
        "long_doc_median": "Long documents: the median is over half the context",
        "multi_turn_shorter": "Multi-turn chat: more than one turn, and each turn's median is shorter than "
                              "single-turn Q&A's",
        "reserve_row": "Reserving {reserve:>4} tokens: {capacity:>2} sequences at once, {idle:.1%} of the reservation "
                       "idle, {too_long:.1%} of requests longer than it",
        "paged_row": "Paging on demand (blocks of {page} tokens): about {capacity:.1f} sequences on average, "
                     "none truncated",
        "full_reserve_fewest": "Reserving 2048 tokens fits the fewest sequences at once",
        "full_reserve_idle": "Reserving 2048: nothing is truncated, but about 80% of the reservation sits idle",
        "short_reserve_truncates": "Reserving 256: 8 times as many sequences, but over half the requests are truncated",
        "few_truncated": "Only reserving 1024 or 2048 truncates fewer than 10% of requests",
        "paged_doubles": "Paging on demand fits more than twice as many sequences as the better of those two",
        "panel_default_over_budget": "The panel's default settings ask for more than the budget, so it admits only "
                                     "as many sequences as fit when reserving 2048",
        "no_free_memory": "{device} does not report its free memory: skipping this demo.",
        # the lab
        "lab_all_ran": "All five buggy caches and the correct one ran",
        "lab_control_matches": "The correct cache (the control): tokens and logits match running without a cache",
        "every_bug_changes_text": "Every bug changes the generated text",
        "logits_before_text": "For at least one bug, the logits drift before the text does",
        # review and summary
        "quiz_title": "Chapter 3 self-check",
        "summary_rows": "The summary table has 9 rows",
        "long_doc_less_idle": "Long documents (requests near the context length) leave less of each reservation "
                              "idle than multi-turn chat…",
        "long_doc_less_paging_gain": "…and gain less from paging than multi-turn chat does",
    },
})

PROMPTS = Phrasebook("misconceptions.prompts", {
    "zh": {
        "running": DEFAULT_PROMPT,  # the course's running example (lesson.DEFAULT_PROMPT)
        "prefix": "人工智能模型",  # 6 tokens: change the first, watch the last
        "lab": "计算",  # the lab's prompt (lesson.LAB_PROMPT): each broken cache first changes a token at its own step
        "previous": "大语言模型",  # the request served before it, with the same cache (lesson.PREVIOUS_PROMPT)
    },
    "en": {
        "running": "Artificial",  # 1 token; the English model continues it with " intelligence"
        "prefix": "Artificial intelligence models",  # 3 tokens; every layer from 1 on moves K and V by over 50%
        # 5 tokens; the broken caches first change a token at steps 4, 1, 1, 3 and 2 (A to E), the logits of cache A
        # drift at step 2, before its tokens do
        "lab": "Computing",
        "previous": "Large language models",  # 5 tokens
    },
})

say = CELLS.say

# The self-check (review.review_questions), asked when the quiz is made: every number a field.
REVIEW = Phrasebook("misconceptions.review", {
    "zh": {
        "list_sep": "、",
        "unit.times": "倍",
        "unit.percent": "%",
        # 3.1: K and V computed per step
        "kv_q": "先预测：用 KV Cache 生成时，解码阶段序列长度为 t 的那一步，要为多少个 token 计算 K 和 V？",
        "kv_t": "t 个",
        "kv_t_why": "那是不用缓存时：每一步把全部上文重新投影一遍。",
        "kv_one": "1 个",
        "kv_one_why": "只有新 token 的 K、V 要算，之前的都从缓存读取（trace 里每个解码步 k_tokens = 1）。",
        "kv_past": "t − 1 个",
        "kv_past_why": "之前的 t − 1 个 token 的 K、V 正是缓存里存着、不用再算的部分。",
        "kv_square": "t² 个",
        "kv_square_why": "t × t 是不用缓存时每层每头的注意力分数个数，不是投影的 token 数。",
        # 3.1: the whole generation's work
        "work_q": "LLaMA-7B 的形状，提示词只有 1 个 token，接着生成 {n} 个 token。先估计：不用缓存时，"
                  "整个生成的计算量大约是用缓存时的几倍？（按 kvlab.costs 的计数：一次乘加记 2 FLOP）",
        "work_why": "不用缓存时第 t 步要算 t 个 token，总共约 1 + 2 + … + {n} ≈ {n}²/2 个 token 的量；用缓存时每步 1 个，"
                    "共 {n} 个。两者之比约 {n}/2：生成越长，差得越多（3.1 节的「空间换时间」）。",
        "work_hint": "数一数两种方式各处理了多少个 token：不用缓存时第 t 步处理 t 个（t = 1 … {n}），用缓存时每步 1 个。"
                     "估计在 10% 以内就算对。",
        # 3.2: padding
        "pad_q": "一个批次 {count} 条序列，现在的长度分别是 {lengths} 个 token。缓存按最长的一条补齐"
                 "（padding，3.2 节），不额外预留。先预测：缓存里百分之几的位置存的是填充、没有用？",
        "pad_why": "分配 {batch} × {longest} = {allocated} 个位置，只用了 {used} 个：{waste:.0%} 是填充。一条长序列就让整批都按它的"
                   "长度分配——这正是分页缓存（3.6 节）按块随用随分配的动机。",
        "pad_hint": "补齐之后每条都占最长那条的长度：先算一共分配了多少个位置，再算真正用了多少。",
        # 3.3: batching's arithmetic intensity
        "batch_q": "LLaMA-7B 的形状，FP16，缓存里已有 {cached} 个 token，解码一步。把批次从 1 加到 {batch}，这一步的算术强度"
                   "（FLOP ÷ 读写的字节）大约变为几倍？先想一想：会不会正好是 {batch} 倍？",
        "batch_why": "约 {gain:.1f} 倍，不到 {batch} 倍：FLOP 随批次变为 {batch} 倍，权重却只读一次，所以强度上升、更接近算力的屋顶"
                     "（3.3 节的批处理）；但每条序列的缓存各读各的，字节里这一部分也跟着批次增长，上下文越长，批处理能提高的"
                     "强度越少。",
        "batch_hint": "权重（约 {weights}）整批只读一次，每条序列的缓存（每个 token {per_token_kib} KiB）各读一次；FLOP 与批次成正比。",
        # 3.3: a longer prompt
        "ttft_q": "同一个模型、同样生成 {new} 个 token，只把提示词从 {short} 个 token 加长到 {long} 个。先预测：哪个指标变化最大？",
        "ttft": "TTFT（首 token 延迟）",
        "ttft_why": "TTFT 主要是预填充：一次前向要处理全部 {long} 个提示词 token，工作量随提示词长度增长。之后每个解码步只算 "
                    "1 个新 token，只是读的缓存长一些。",
        "tpot": "TPOT（每 token 延迟，按请求取平均）",
        "tpot_why": "解码每步只处理 1 个新 token；提示词变长只让它读的缓存变长，在不太长的上下文里远没有预填充的变化大。",
        "itl": "ITL 的中位数（单个解码步的耗时）",
        "itl_why": "解码每步仍只处理 1 个新 token；缓存变长让每步多读一些 K/V，但在不太长的上下文里，每步读的 K/V 远少于权重，"
                   "单步耗时只涨一点。",
        "per_token": "每个 token 的 KV Cache 字节数",
        "per_token_why": "每个 token 的 K/V 大小只由层数、KV 头数、头维度和数据类型决定（3.2 节），与提示词多长无关；变的是 "
                         "token 的个数。",
        # 3.3: a few slow steps
        "slow_q": "一次生成里大多数解码步都是 {fast} ms，只有 {slow} 步因为机器被别的程序打断，各花了 {slow_ms} ms。"
                  "先预测：TPOT（按请求算的平均）和 ITL（逐步间隔）的中位数，哪个受影响大？",
        "slow_tpot": "TPOT：它是平均值，几个特别慢的步会把它拉高",
        "slow_tpot_why": "TPOT =（端到端延迟 − TTFT）÷（输出 token 数 − 1），是平均；ITL 是每一步的间隔，报告中位数和尾部分位数："
                         "中位数几乎不动，慢的那几步出现在 P99 这样的尾部里。两者都要看。",
        "slow_itl": "ITL 的中位数：慢步会让每一步都变慢",
        "slow_itl_why": "中位数只看排在中间的那一步：{slow} 个慢步改变不了它。",
        "slow_same": "两者一样，TPOT 就是 ITL 的中位数",
        "slow_same_why": "TPOT 是平均值，不是中位数；有慢步时两者可以差很多。",
        # 3.4: GQA and INT8
        "int8_q": "LLaMA-7B（{l_layers} 层、{l_heads} 个 KV 头、头维度 {l_dim}）用 FP16 缓存；Qwen2.5-7B（{q_layers} 层、"
                  "{q_heads} 个 KV 头、头维度 {q_dim}）改用 INT8 缓存（每个数 1 字节，不计缩放系数）。先预测：LLaMA-7B 每个 "
                  "token 的缓存是 Qwen2.5-7B 的几倍？",
        "int8_why": "三个因子相乘：层数 {l_layers}/{q_layers}，KV 头 {l_heads}/{q_heads}（GQA），每个数 2 字节对 1 字节（INT8）："
                    "{l_bytes} 对 {q_bytes}，约 {gain:.1f} 倍。GQA 和量化两种省法可以叠加；INT8 的代价是一点 logits 误差"
                    "（3.3 节）。",
        "int8_hint": "分别看层数、KV 头数和每个数的字节数之比，再相乘。",
        # 3.4: MLA
        "mla_q": "DeepSeek-V3 有 {layers} 层、{heads} 个注意力头、头维度 {dim}，用 MLA 每层每个 token 只存 {latent} 个数。"
                 "如果它像普通的多头注意力那样每个头都存自己的 K 和 V（头维度按 {dim} 算），缓存会是 MLA 的几倍？",
        "mla_why": "每层每个 token：2 × {heads} × {dim} = {plain:,} 个数，对 MLA 的 {latent} 个，约 {gain:.0f} 倍。层数、序列长度"
                   "两边相同，约掉了。",
        "mla_hint": "只比每层每个 token 存多少个数：K 和 V 各一份，每个头一份。",
        # 3.4: a sliding window
        "window_q": "Gemma-2-9B 一半的层是滑动窗口层（窗口 {window:,} 个 token，只存最近这么多），另一半存全部 token。在它的整个"
                    "上下文 S = {S:,} 时，缓存是普通公式（每层都存 S 个 token）算出的百分之几？",
        "window_why": "一半的层存 {S:,} 个，一半的层只存 {window:,} 个：平均每层 {mean:,} 个，是 {S:,} 的 {share:.0f}%。S 越长，"
                      "窗口省得越多，但全局层仍随 S 线性增长。",
        "window_hint": "分别算全局层和窗口层每层存多少个 token，再取平均。",
        # 3.5: recomputing V
        "v_q": "有人提议：只缓存 K，每一步用 V = h W_V 把旧 token 的 V 临时算出来，「反正只是一次矩阵乘法」。"
               "先预测：这样一步要多做多少工作？",
        "v_cheap": "只多一次 V 的投影，很便宜",
        "v_cheap_why": "W_V 乘的是旧 token 在这一层的隐藏状态 h，而缓存里没有 h：要得到它，得把下面各层在整个前缀上重跑一遍。",
        "v_prefix": "差不多要把整个前缀在下面各层重算一遍，接近不用缓存",
        "v_prefix_why": "第 l 层的 h 是下面各层注意力和 MLP 的输出，混入了整个前缀的信息；算出它就是无缓存做的几乎全部工作"
                        "（误区 2 的计数：即使最省的做法，也要重跑下面 L − 1 层）。",
        "v_from_k": "不用多做：V 可以从缓存的 K 换算出来",
        "v_from_k_why": "K = h W_K 和 V = h W_V 是同一个 h 的两个不同投影，一般不能从一个换算出另一个。",
        "v_queries": "要重算的是旧 token 的 Q",
        "v_queries_why": "旧 token 的 Q 以后再也用不到（误区 2 的实验：把它们换成噪声，最后一行不变）。",
        # 3.5: a bigger pool against a bigger reservation
        "pool_q": "两台服务器：A 用按需分页的 KV Cache（vLLM），B 给每条序列固定预留一段缓存。先预测：把 A 的 "
                  "gpu_memory_utilization 从 {low} 调到 {high}（权重和激活都没变），与把 B 每条序列固定预留的 token 数"
                  "翻一倍相比，各会怎样？",
        "pool_right": "调高比例：缓存池变大，能同时服务的序列变多；预留翻倍：每条占得更多，能同时服务的变少",
        "pool_right_why": "池子越大越好（只要权重和激活放得下）；每条序列的预留超出它用到的部分则是浪费。误区 3 说的是后者。",
        "pool_both_better": "两者都让缓存变大，所以都更好",
        "pool_both_better_why": "池子变大是好事，但每条序列预留翻倍只是让同一个池子装下的序列变少。",
        "pool_both_waste": "两者都会浪费显存",
        "pool_both_waste_why": "调高比例是把更多显存给了缓存池：分页之下，它会被真正的 token 用上。",
        # 3.5: a reset that forgets the length
        "reset_q": "一个缓存的 reset() 忘了把 length 置 0。先预测：如果每个请求都用一块全新的缓存，与无缓存的参考比，会看到什么？",
        "reset_right": "每一步都和参考相同：这个 bug 只在复用缓存时出现",
        "reset_right_why": "全新的缓存 length 本来就是 0，reset() 根本没被用到；服务完一个请求再复用它，新请求才会写在旧内容后面"
                           "（找 bug 实验室里去掉「{reuse}」试试）。",
        "reset_first": "第 1 步（预填充）就出错",
        "reset_first_why": "那要缓存里先有东西：全新的缓存里什么都没有。",
        "reset_second": "第 2 步才出错",
        "reset_second_why": "解码时的读写都正确：错的只是 reset()，而全新的缓存用不到它。",
    },
    "en": {
        "list_sep": ", ",
        "unit.times": "times",
        "unit.percent": "%",
        "kv_q": "Predict first: generating with a KV cache, at the decode step where the sequence is t tokens long, for "
                "how many tokens are K and V computed?",
        "kv_t": "t",
        "kv_t_why": "That is without a cache: every step projects the whole context again.",
        "kv_one": "1",
        "kv_one_why": "Only the new token's K and V are computed; all earlier ones are read from the cache (the trace "
                      "shows k_tokens = 1 at every decode step).",
        "kv_past": "t − 1",
        "kv_past_why": "The K and V of the t − 1 earlier tokens are exactly what the cache holds and need not be "
                       "computed again.",
        "kv_square": "t²",
        "kv_square_why": "t × t is how many attention scores each layer and head computes without a cache, not how "
                         "many tokens are projected.",
        "work_q": "At LLaMA-7B's shape, a prompt of just 1 token, then {n} tokens generated. Estimate first: without a "
                  "cache, about how many times the work with a cache does the whole generation take? (Counted as "
                  "kvlab.costs counts: 2 FLOP per multiply-add)",
        "work_why": "Without a cache, step t computes t tokens: about 1 + 2 + … + {n} ≈ {n}²/2 tokens' worth in all; "
                    "with a cache it is 1 per step, {n} in all. The ratio is about {n}/2: the longer the generation, "
                    "the bigger the gap (section 3.1's \"trading memory for compute\").",
        "work_hint": "Count the tokens each way processes: without a cache, step t processes t of them (t = 1 … {n}); "
                     "with a cache, 1 per step. An estimate within 10% counts as right.",
        "pad_q": "A batch of {count} sequences, now {lengths} tokens long. The cache pads every one to the longest "
                 "(padding, section 3.2) and reserves nothing more. Predict first: what percentage of the cache's "
                 "slots hold padding and go unused?",
        "pad_why": "{batch} × {longest} = {allocated} slots allocated, only {used} used: {waste:.0%} is padding. One "
                   "long sequence makes the whole batch allocate to its length, which is exactly why the paged cache "
                   "(section 3.6) allocates block by block as it goes.",
        "pad_hint": "After padding, every sequence takes the longest one's length: first count the slots allocated, "
                    "then the slots actually used.",
        "batch_q": "At LLaMA-7B's shape, FP16, with {cached} tokens already in the cache, one decode step. Raising the "
                   "batch size from 1 to {batch} multiplies this step's arithmetic intensity (FLOP ÷ bytes read and "
                   "written) by about how much? Think first: is it exactly {batch}?",
        "batch_why": "About {gain:.1f} times, less than {batch}: the FLOP grow {batch} times with the batch, but the "
                     "weights are read only once, so the intensity rises towards the compute roof (section 3.3's "
                     "batching); each sequence's cache, though, is read on its own, so that part of the bytes grows "
                     "with the batch too, and the longer the context, the less batching can raise the intensity.",
        "batch_hint": "The weights (about {weights}) are read once for the whole batch, each sequence's cache ({per_token_kib} "
                      "KiB per token) once per sequence; the FLOP are proportional to the batch size.",
        "ttft_q": "The same model generates the same {new} tokens; only the prompt grows from {short} tokens to {long}. "
                  "Predict first: which metric changes the most?",
        "ttft": "TTFT (time to first token)",
        "ttft_why": "TTFT is mostly the prefill: one forward pass has to process all {long} prompt tokens, so its work "
                    "grows with the prompt's length. Every decode step after it computes only 1 new token and just "
                    "reads a somewhat longer cache.",
        "tpot": "TPOT (time per output token, averaged per request)",
        "tpot_why": "Each decode step processes only 1 new token; a longer prompt only makes the cache it reads longer, "
                    "which at moderate context lengths changes far less than the prefill.",
        "itl": "The median ITL (the time of one decode step)",
        "itl_why": "Each decode step still processes only 1 new token; a longer cache makes every step read a little "
                   "more K/V, but at moderate context lengths a step reads far less K/V than weights, so the step "
                   "time rises only a little.",
        "per_token": "The KV cache bytes per token",
        "per_token_why": "A token's K/V size depends only on the number of layers, KV heads, the head dim and the data "
                         "type (section 3.2), not on the prompt's length; what changes is the number of tokens.",
        "slow_q": "In one generation most decode steps take {fast} ms, but {slow} steps took {slow_ms} ms each because "
                  "another program interrupted the machine. Predict first: which is hit harder, TPOT (the average "
                  "per request) or the median ITL (step by step)?",
        "slow_tpot": "TPOT: it is an average, and a few very slow steps pull it up",
        "slow_tpot_why": "TPOT = (end-to-end latency − TTFT) ÷ (output tokens − 1) is an average; ITL is the gap at "
                         "each step, reported as the median and tail percentiles: the median hardly moves, and the "
                         "slow steps show up in a tail like P99. Look at both.",
        "slow_itl": "The median ITL: the slow steps make every step slower",
        "slow_itl_why": "The median looks only at the step in the middle: {slow} slow steps cannot move it.",
        "slow_same": "They are the same: TPOT is the median ITL",
        "slow_same_why": "TPOT is an average, not a median; with slow steps the two can differ a lot.",
        "int8_q": "LLaMA-7B ({l_layers} layers, {l_heads} KV heads, head dim {l_dim}) uses an FP16 cache; Qwen2.5-7B "
                  "({q_layers} layers, {q_heads} KV heads, head dim {q_dim}) switches to an INT8 cache (1 byte per "
                  "number, scales not counted). Predict first: LLaMA-7B's cache per token is how many times "
                  "Qwen2.5-7B's?",
        "int8_why": "Three factors multiplied: layers {l_layers}/{q_layers}, KV heads {l_heads}/{q_heads} (GQA), and 2 "
                    "bytes per number against 1 (INT8): {l_bytes} against {q_bytes}, about {gain:.1f} times. GQA and "
                    "quantization stack; INT8 costs a little logits error (section 3.3).",
        "int8_hint": "Take the ratios of the layers, the KV heads and the bytes per number, then multiply them.",
        "mla_q": "DeepSeek-V3 has {layers} layers, {heads} attention heads and a head dim of {dim}; with MLA it stores "
                 "only {latent} numbers per token per layer. If, like ordinary multi-head attention, every head "
                 "stored its own K and V (at a head dim of {dim}), how many times larger than MLA's would the cache be?",
        "mla_why": "Per token per layer: 2 × {heads} × {dim} = {plain:,} numbers against MLA's {latent}, about "
                   "{gain:.0f} times. The layers and the sequence length are the same on both sides and cancel.",
        "mla_hint": "Compare only how many numbers each layer stores per token: one K and one V per head.",
        "window_q": "Half of Gemma-2-9B's layers are sliding-window layers (a window of {window:,} tokens: they keep "
                    "only that many of the latest), the other half keep every token. At its whole context, "
                    "S = {S:,}, what percentage of the plain formula's size (every layer storing S tokens) is its cache?",
        "window_why": "Half the layers store {S:,} tokens, half only {window:,}: {mean:,} per layer on average, "
                      "{share:.0f}% of {S:,}. The longer S, the more the window saves, but the global layers still "
                      "grow linearly with S.",
        "window_hint": "Count the tokens a global layer and a window layer each store, then take the mean.",
        "v_q": "Someone suggests caching K only and computing the old tokens' V on the fly at each step with "
               "V = h W_V: \"it's just one matrix multiplication\". Predict first: how much more work is such a step?",
        "v_cheap": "Just one more V projection: cheap",
        "v_cheap_why": "W_V multiplies the old tokens' hidden state h at this layer, and the cache holds no h: getting "
                       "it means re-running the layers below over the whole prefix.",
        "v_prefix": "Nearly the whole prefix recomputed through the layers below: close to no cache at all",
        "v_prefix_why": "Layer l's h is the output of the attention and MLP of the layers below and carries "
                        "information from the whole prefix; computing it is nearly all the work of no cache "
                        "(misconception 2's count: even the leanest way re-runs the L − 1 layers below).",
        "v_from_k": "No extra work: V can be converted from the cached K",
        "v_from_k_why": "K = h W_K and V = h W_V are two different projections of the same h; in general neither can "
                        "be converted into the other.",
        "v_queries": "What needs recomputing is the old tokens' Q",
        "v_queries_why": "The old tokens' Q is never used again (misconception 2's experiment: replace them with noise "
                         "and the last row does not change).",
        "pool_q": "Two servers: A uses a KV cache paged on demand (vLLM), B reserves a fixed stretch of cache for every "
                  "sequence. Predict first: what does raising A's gpu_memory_utilization from {low} to {high} "
                  "(weights and activations unchanged) do, compared with doubling the tokens B reserves per sequence?",
        "pool_right": "The higher share makes the cache pool larger, so more sequences can be served at once; the "
                      "doubled reservation makes each sequence take more, so fewer can",
        "pool_right_why": "The bigger the pool the better (as long as weights and activations fit); a sequence's "
                          "reservation beyond what it uses is waste. Misconception 3 is about the latter.",
        "pool_both_better": "Both make the cache bigger, so both are better",
        "pool_both_better_why": "A bigger pool is good, but doubling each sequence's reservation only makes the same "
                                "pool hold fewer sequences.",
        "pool_both_waste": "Both waste GPU memory",
        "pool_both_waste_why": "The higher share gives more GPU memory to the cache pool: with paging, real tokens "
                               "will use it.",
        "reset_q": "A cache's reset() forgets to set length to 0. Predict first: if every request gets a brand-new "
                   "cache, what do you see against the uncached reference?",
        "reset_right": "Every step matches the reference: this bug shows only when a cache is reused",
        "reset_right_why": "A brand-new cache's length is 0 already and reset() is never called; only when the cache "
                           "is reused after serving a request does the new request get written after the old "
                           "contents (in the bug-hunting lab, try unticking \"{reuse}\").",
        "reset_first": "It goes wrong at step 1 (the prefill)",
        "reset_first_why": "For that the cache would have to hold something already: a brand-new cache holds nothing.",
        "reset_second": "It goes wrong only at step 2",
        "reset_second_why": "Reading and writing while decoding are both right: only reset() is wrong, and a "
                            "brand-new cache never needs it.",
    },
})

# The lesson's own words, each looked up when it is shown: the controls' labels (the *_LABEL constants stay the
# Chinese labels; label() shows them in the course's language), the panels' readouts, the names of the ways a step is
# counted, the request spreads, the lab's cards and readouts, and the summary table.
PANELS = Phrasebook("misconceptions.panels", {
    "zh": {
        "label.new_tokens": "生成 token 数",
        "label.prompt_len": "提示词长度",
        "label.batch": "批次 B",
        "label.repeats": "重复次数（取中位数）",
        "label.model": "模型",
        "label.spread": "请求长度分布",
        "label.reserve": "每条序列预留（tokens）",
        "label.concurrent": "同时服务的序列数",
        "label.cache": "缓存",
        "label.prompt": "提示词",
        "label.reveal": "显示解释",
        "label.reuse": "先服务上一个请求",
        # misconception 1
        "weights_same": "不变 ✓",
        "weights_changed": '<span style="color:#b00">变了！</span>',
        "in_state_dict": "是",
        "not_in_state_dict": "不在",
        "weights_readout": "参数：{n_params:,} 个，{n_bytes}；state_dict 校验和 <code>{before}</code> → <code>{after}</code>"
                           "（{same}）<br>KV Cache 已写入：B = {B} 条序列 × S = {S} 个 token（提示词 {P} + 生成 {n} − 1："
                           "最后一个新 token 还没有送回模型） × 每个 token {per_token} = <b>{written:,} B = {written_shown}</b>；"
                           "预分配的张量在预填充之前就已经是 {allocated:,} B（按 {reserved} 个 token 分配，3.3 节）；缓存内容的"
                           "校验和 <code>{cache_checksum}</code>（随输入而变）<br>缓存在 state_dict 里吗？{in_state_dict}"
                           "（没有哪个参数张量与缓存共用内存）；reset() 之后：{length} 个 token，已用 {used} B",
        # misconception 2
        "name.none": "无缓存",
        "name.k_only": "只缓存 K",
        "name.kv": "有缓存",
        "flop.none": "无缓存",
        "flop.k_only": "只缓存 K（kvlab 的实现）",
        "flop.k_only_min": "只缓存 K（最省的做法）",
        "flop.kv": "有缓存",
        "counting": "按 kvlab.costs 的计数（一次乘加记 2 FLOP，掩码遮住的一半也算）",
        "mode_time": "{name} {ms:.2f} ms",
        "time_sep": "，",
        "same_tokens": "三种方式生成的 token 完全相同",
        "tokens_differ": '<span style="color:#b00">token 不同！</span>',
        "k_only_readout": "生成 {n} 个 token：{tokens}。最后 1/4 的解码步（t = {tail}）单步耗时中位数（每次重复各取一个，再取 {r} "
                          "次的中位数）：<b>{times}</b>（{device}，重复 {r} 次）<br>这些耗时说明了什么，按这次测到的数字写在下一格"
                          "的输出里（重新测量之后，再运行下一格）。<br>trace 记录的每步投影（序列长度为 t 的那一步）：无缓存 K = V = "
                          "t；只缓存 K：K = 1，<b>V = t</b>；有缓存：K = V = 1。{counting}，t = {t} 时只缓存 K 的一步仍要做无缓存的 "
                          "<b>{k_share:.1%}</b> 的计算（有缓存：{kv_share:.2%}）",
        # misconception 3: the request spreads
        "spread.chat": "单轮问答",
        "spread.chat.note": "示例：多数很短，少数很长",
        "spread.long_doc": "长文档问答",
        "spread.long_doc.note": "提示词很长",
        "spread.multi_turn": "多轮对话",
        "spread.multi_turn.note": "每轮很短，历史很长",
        "spread.turn": "对数正态分布，中位数 {median} 个 token，σ = {sigma:g}",
        "spread.turns": "每个请求是 1–{turns} 轮对话的全部历史（轮数均匀分布），每一轮{turn}",
        "spread.one_turn": "每个请求一轮，{turn}",
        "spread.describe": "{count} 个请求，{shape}，随机种子 {seed}，截断到模型的上下文长度",
        "spread.option": "{label}（{note}）",
        # misconception 3: the budget readout
        "budget.only": "只剩",
        "budget.card": "{gpu}：总显存 {total}，按 {usable:g} 规划 {budget}（{note}）；{model} 的 {dtype} 权重 {weights}；"
                       "留给 KV Cache 的{only} <b>{room}</b>。",
        "budget.slot": "每条序列预留 R = {R:,} 个 token × {per_token}（{dtype}）= {slot} → ",
        "budget.capacity": "最多同时 <b>{capacity}</b> 条序列。",
        "budget.none": '<span style="color:#b00">最多同时 <b>0</b> 条序列：连 1 条都放不下。</span>',
        "budget.idle": "（{admitted} 条序列共闲置约 {idle}）",
        "budget.spread": "按「{spread}」的请求长度（编出来的示例分布，不是测量数据：{describe}）：<b>{too_long:.1%}</b> 的请求比 R "
                         "长（会被截断或拒绝）；所有请求结束时平均填满预留的 {used:.1%}（比 R 长的按填满计），<b>{idle_share:.1%} "
                         "闲置</b>{idle}。这是请求结束那一刻的填充率，也就是最少的浪费：生成途中填得更少。",
        "budget.past_context": '<span style="color:#8a4b00">⚠ R 超过了 {model} 的上下文（{context:,} 个 token）：每条序列多出的 '
                               "{extra:,} 个 token 的预留永远用不上。</span>",
        "budget.over": '<span style="color:#b00">想同时服务 {wanted} 条：需要 {needed}，超出预算 <b>{over}</b>——第 {first} 条'
                       "序列起就放不下了。预算检查在分配之前拒绝它们，而不是等分配时显存不足（OOM）。</span>",
        "budget.fits": "想同时服务 {wanted} 条：需要 {needed}，放得下，预算内还剩 {left}。",
        "budget.paged": "对比：按需分页（每块 {page} 个 token，只给用到的块）时，同样的显存平均能放下约 <b>{capacity:.1f}</b> "
                        "条这样的请求，而且一条都不截断。",
        "budget.no_fit": "{gpu}：{why}",
        # the refused allocation
        "refusal.gpu_where": "这块 GPU 只有",
        "refusal.cpu_where": "本机只有",
        "refusal.gpu_memory": "显存",
        "refusal.cpu_memory": "内存",
        "refusal.line": "kvlab 拒绝分配：批次 B = {batch:,} 条序列、每条 {seq_len:,} 个 token 的缓存需要 {requested}，{where} "
                        "{free} {memory}空闲",
        "refusal.html": "<p><b>{line}</b>：什么都没有分配，Jupyter 内核安然无恙。</p><details><summary>细节：API 抛出的 "
                        "ValueError 原文（英文）。开头的 <code>{argument}</code> 是它建议改小的参数；{batch:,} 是批次大小 B"
                        "（要同时缓存的序列数）：演示模型一条序列的缓存只有 {per_sequence}，要凑出两倍于空闲内存的缓存，得要这么多"
                        "条。原文还算出了放得下的大小：多少条序列，或者这么多条序列时每条最多多少个 token。原文如下：</summary>"
                        "<p><code>{message}</code></p></details>",
        # the lab: the cards
        "card.kv.label": "对照：正确的 KVCache",
        "card.kv.explanation": "这是 kvlab 的 KVCache，没有 bug：每一步的 logits 与无缓存的参考只差浮点舍入（小于 1e-5），"
                               "生成的 token 完全相同。",
        "card.kv.fix": "无需修复。",
        "card.rope_offset.label": "缓存 A",
        "card.rope_offset.explanation": "新 token 的 K 存进缓存时，旋转位置编码（RoPE）用的是位置 0、1、2……而不是它在序列中的真实"
                                        "位置 length、length + 1……：写 K 时漏掉了位置偏移。预填充从位置 0 开始，所以第 1 步完全"
                                        "正确；从第 2 步（第一次解码）起，每个新 K 都自称在位置 0，注意力分数里的相对位置全错了。"
                                        "模型很有把握时，错误的 logits 仍可能选出同一个 token，所以 token 往往要晚几步才变。",
        "card.rope_offset.fix": "旋转 K 时用 positions = length + arange(T)（kvlab 的 rope_and_mask(start=cache.length, ...)）。",
        "card.no_reset.label": "缓存 B",
        "card.no_reset.explanation": "reset() 忘了把 length 置 0。服务完上一个请求（「{previous}」）后，同一块缓存接着服务这个"
                                     "提示词：新的提示词被接在上一个请求的 token 后面，既能看到上一个请求的内容，位置编码也从"
                                     "错误的位置开始。所以第 1 步的 logits 就不同了；而全新的缓存从 length = 0 开始，完全正确"
                                     "（去掉「{reuse}」试试）。",
        "card.no_reset.fix": "reset() 里写上 self.length = 0（存储本身可以留着复用：读取只看前 length 个位置）。",
        "card.k_as_v.label": "缓存 C",
        "card.k_as_v.explanation": "写缓存时把 K 写进了 V 的位置（复制粘贴时少改了一个字母）。注意力用权重对「K」求加权平均，"
                                   "输出完全不对，第 1 步（预填充）就已经出错，而且错得很离谱。",
        "card.k_as_v.fix": "self.v[layer, :, :, length:end] = v（而不是 = k）。",
        "card.off_by_one.label": "缓存 D",
        "card.off_by_one.explanation": "新 token 写在 length − 1 而不是 length：把「最后一个已存 token 的下标」当成了「下一个空位」。"
                                       "预填充写在 0 … P−1（P 是提示词的 token 数），第 1 步正确。第一次解码把新 token 写在 "
                                       "P−1，覆盖了提示词最后一个 token 的 K/V；此后每个新 token 都比应在的位置早一格，而注意力"
                                       "读到的最后一格（length）始终还没写过：全新的缓存里是 0，复用的缓存里是上一个请求留下的"
                                       "旧数据。结果：提示词最后一个 token 丢了，每一步还多看到一个假 token。",
        "card.off_by_one.fix": "写入区间是 [length, length + T)：start = self.length。",
        "card.one_slot.label": "缓存 E",
        "card.one_slot.explanation": "所有层都读写第 0 层的那一格（忘了用 layer 下标）。同一次前向计算里，每一层都先写入新 "
                                     "token 再读取，所以预填充（第 1 步）恰好正确；从第一次解码起，每一层看到的旧 token 的 K/V "
                                     "都是最后一层写下的，而不是本层的。",
        "card.one_slot.fix": "按 self.k[layer] / self.v[layer] 读写：每一层有自己的一份缓存。",
        # the lab: the printed overview and the panel
        "lab.line_same": "{label}：{steps} 步全部与参考相同（logits 的差异都在浮点误差以内）",
        "lab.tokens_same": "token 全部相同",
        "lab.tokens_from": "token 从第 {step} 步起不同",
        "lab.line": "{label}：{tokens}，logits 从第 {logit} 步起偏离",
        "lab.step_header": "第几步",
        "lab.prompt_header": "提示词",
        "lab.reference_row": "无缓存（参考）",
        "lab.teacher_forcing": "「无缓存（参考）」这一行是逐步对答案（teacher forcing）：每一步让不用缓存的模型读<b>这个缓存"
                               "已经写出的上文</b>，看它选哪个 token，所以两行每一步比的是同一个输入；缓存写歪之后，参考是在"
                               "续写一段歪了的文字，这一行本身就不通顺。不用缓存、让模型自己一路写下去是：「{own}」",
        "lab.served_reused": "先服务上一个请求「{previous}」，reset() 后再服务它",
        "lab.served_fresh": "用一块全新的缓存服务它",
        "lab.intro": "提示词「{prompt}」：{served}；每一步都和不用缓存的模型读同样的上文（这个缓存已经写出的文字）时选的下一个 "
                     "token 对比：",
        "lab.all_same": "<b>{label}：{steps} 步全部相同</b>；logits 最大差异 {diff:.1e}",
        "lab.hidden": "这次的设置恰好没有让 bug 暴露出来——bug 仍然在：换一个提示词、多生成几个 token，或者改一改「{reuse}」试试。",
        "lab.differs": "<b>{label}：第 {step} 步开始不同</b>：参考「{reference}」，这个缓存「{output}」；logits 从第 {logit} 步起"
                       "就超出了浮点误差；{steps} 步里有 {differing} 步选的 token 与参考不同",
        "lab.reveal": "<b>解释：</b>{explanation}<br><b>修复：</b>{fix}<br><b>代码</b>（这个缓存改写的方法）：{methods}",
        "lab.guess": "<i>先自己猜一猜 bug 在哪里，再勾选「{reveal}」。</i>",
        # the summary table
        "summary.head": "<table><thead><tr><th>本章</th><th>本机实测（本笔记本刚刚算出）</th><th>结论</th></tr></thead>",
        "summary.3_1": "3.1 自回归解码：空间换时间",
        "summary.3_1.measured": "最后 1/4 解码步（t = {tail}）的单步中位数：无缓存 {none:.2f} ms，有缓存 {kv:.2f} ms（不缓存是它的 "
                                "{ratio:.1f} 倍）；代价是缓存里存着的 {held}",
        "summary.3_1.conclusion": "缓存旧 token 的 K/V，每步只算新 token：把重复计算变成增量计算",
        "summary.3_2": "3.2 存储结构 L×B×H×S×D",
        "summary.3_2.measured": "演示模型的缓存（L, B, H, S, D）=（{L}, {B}, {H}, {S}, {D}）：{shape} = {formula:,} B，trace 记录 "
                                "{written:,} B",
        "summary.3_2.conclusion": "缓存大小 = 2（K、V）× L × B × H × S × D × 每元素字节，随 B 和 S 线性增长",
        "summary.3_3": "3.3 预填充与解码",
        "summary.3_3.measured": "预填充 {prompt_len} 个 token 一次前向 {prefill}（每个 token {per_token:.3f} ms）；之后每个解码步"
                                "（t = {lens}）的中位数 {decode}，只出 1 个 token。与 3.1 那一行的有缓存步长度不同，也不是同一次测量",
        "summary.3_3.conclusion": "预填充一次前向处理整段提示词；解码一步只出一个 token，每步都要读一遍权重和缓存",
        "summary.3_4": "3.4 LLaMA-7B 的显存",
        "summary.3_4.measured": "S = 2048、B = 1、FP16：{llama}（原文写 0.50 GB）；{gpu} 按 {usable:g} 规划，放下权重后每条预留 "
                                "{reserved:,} 个 token 的序列放得下 {capacity} 条",
        "summary.3_4.conclusion": "先算权重，再按可用显存算能放下多少 token、多少条序列",
        "summary.scenario_part": "{spread}：闲置 {idle:.0%}，固定 {capacity} 条 vs 分页约 {paged:.1f} 条",
        "summary.part_sep": "；",
        "summary.scenarios": "业务场景",
        "summary.scenarios.measured": "{gpu} + {model}，每条预留整个上下文 {reserved:,}：{parts}",
        "summary.scenarios.conclusion": "请求越接近上下文长度（长文档问答），固定预留浪费越少、分页收益越小；请求长度相对预留越短、"
                                        "越分散（单轮问答、多轮对话），分页省得越多",
        "summary.check_sep": "、",
        "summary.plan": "预留 {reserved:,} → {capacity} 条，闲置 {idle:.0%}，{too_long:.1%} 的请求放不下",
        "summary.step": "{label} 第 {step} 步",
        "summary.step_sep": "，",
        "summary.m1": "误区 1：缓存是参数",
        "summary.all_same": "全部不变",
        "summary.changed": "变了",
        "summary.all_equal": "全部等于",
        "summary.not_equal": "不等于",
        "summary.m1.measured": "{runs} 次生成（B × S = {checks}）：参数校验和{same}；缓存字节数{exact} B × S × {per_token}；"
                               "reset() 后 {length} 个 token",
        "summary.m1.conclusion": "缓存是推理时另外分配的临时张量，随输入增长；权重一个字节都不变",
        "summary.m2": "误区 2：只缓存 K",
        "summary.m2.measured": "最后 1/4 解码步的单步耗时：{times}；最后一步投影 V 的 token 数（无缓存 / 只缓存 K / 有缓存）"
                               "{none} / {k_only} / {kv}",
        "summary.m2.conclusion": "V 必须和 K 一起缓存，否则每步仍要把整个前缀重算一遍",
        "summary.m3": "误区 3：缓存越大越好",
        "summary.m3.measured": "{gpu} + {model}（FP16，按 {usable:g} 规划）：{plans}",
        "summary.m3.conclusion": "预留多少要看显存预算和请求长度的分布；按需分页（PagedAttention）把闲置压到每条序列的最后一块之内",
        "summary.lab": "找 bug",
        "summary.lab_same": "全部相同",
        "summary.lab_differs": "不同！",
        "summary.lab.measured": "{bugs} 个坏缓存在提示词「{prompt}」上第一次生成不同的 token：{steps}；正确的缓存：{control}",
        "summary.lab.conclusion": "缓存的 bug 不会报错，只会悄悄改变输出：与无缓存的参考逐步对比才能发现",
    },
    "en": {
        "label.new_tokens": "New tokens",
        "label.prompt_len": "Prompt length",
        "label.batch": "Batch B",
        "label.repeats": "Repeats (median taken)",
        "label.model": "Model",
        "label.spread": "Request lengths",
        "label.reserve": "Reserved per sequence (tokens)",
        "label.concurrent": "Sequences served at once",
        "label.cache": "Cache",
        "label.prompt": "Prompt",
        "label.reveal": "Show the explanation",
        "label.reuse": "Serve a previous request first",
        "weights_same": "unchanged ✓",
        "weights_changed": '<span style="color:#b00">changed!</span>',
        "in_state_dict": "yes",
        "not_in_state_dict": "no",
        "weights_readout": "Parameters: {n_params:,}, {n_bytes}; state_dict checksum <code>{before}</code> → "
                           "<code>{after}</code> ({same})<br>KV cache written: batch B = {B} × length S = {S} (prompt "
                           "{P} + generated {n} − 1: the last new token has not been fed back yet) × {per_token} per token "
                           "= <b>{written:,} B = {written_shown}</b>; the preallocated tensors were already {allocated:,} B "
                           "before the prefill (allocated for S = {reserved}, section 3.3); checksum of the cache's "
                           "contents <code>{cache_checksum}</code> (it changes with the input)<br>Is the cache in the "
                           "state_dict? {in_state_dict} (no parameter tensor shares memory with it); after reset(): "
                           "{length} tokens, {used} B used",
        "name.none": "no cache",
        "name.k_only": "K only",
        "name.kv": "with a cache",
        "flop.none": "no cache",
        "flop.k_only": "K only (kvlab's implementation)",
        "flop.k_only_min": "K only (the leanest way)",
        "flop.kv": "with a cache",
        "counting": "Counted as kvlab.costs counts (2 FLOP per multiply-add, the masked half included)",
        "mode_time": "{name} {ms:.2f} ms",
        "time_sep": ", ",
        "same_tokens": "the three ways generate exactly the same tokens",
        "tokens_differ": '<span style="color:#b00">the tokens differ!</span>',
        "k_only_readout": "Generated {n} tokens: {tokens}. Median step time over the last 1/4 of the decode steps "
                          "(t = {tail}; one median per repeat, then the median of the {r}): <b>{times}</b> ({device}, "
                          "{r} repeats)<br>What these times say is written, from the numbers measured this time, in the "
                          "next cell's output (after measuring again, rerun the next cell).<br>Projections per step "
                          "recorded by the trace (the step at sequence length t): no cache K = V = t; K only: K = 1, "
                          "<b>V = t</b>; with a cache: K = V = 1. {counting}: at t = {t}, a K-only step still does "
                          "<b>{k_share:.1%}</b> of the uncached work (with a cache: {kv_share:.2%})",
        "spread.chat": "Single-turn Q&A",
        "spread.chat.note": "an example: most short, a few long",
        "spread.long_doc": "Long-document Q&A",
        "spread.long_doc.note": "long prompts",
        "spread.multi_turn": "Multi-turn chat",
        "spread.multi_turn.note": "short turns, long history",
        "spread.turn": "log-normal with a median of {median} tokens, σ = {sigma:g}",
        "spread.turns": "each request is the whole history of a 1–{turns}-turn conversation (turns uniformly many), "
                        "each turn {turn}",
        "spread.one_turn": "each request one turn, {turn}",
        "spread.describe": "{count} requests, {shape}, random seed {seed}, cut to the model's context length",
        "spread.option": "{label} ({note})",
        "budget.only": "only ",
        "budget.card": "{gpu}: {total} of memory in all, {budget} planned at {usable:g} ({note}); {model}'s {dtype} "
                       "weights take {weights}; that leaves {only}<b>{room}</b> for the KV cache.",
        "budget.slot": "Each sequence reserves R = {R:,} tokens × {per_token} ({dtype}) = {slot} → ",
        "budget.capacity": "at most <b>{capacity}</b> sequences at once.",
        "budget.none": '<span style="color:#b00">at most <b>0</b> sequences at once: not even 1 fits.</span>',
        "budget.idle": " (about {idle} idle across the {admitted} sequences)",
        "budget.spread": "With the request lengths of \"{spread}\" (a made-up example spread, not measured data: "
                         "{describe}): <b>{too_long:.1%}</b> of requests are longer than R (truncated or refused); by "
                         "the time they end, requests fill {used:.1%} of their reservation on average (those longer "
                         "than R count as full), so <b>{idle_share:.1%} sits idle</b>{idle}. That is the fill at the "
                         "moment a request ends, the least waste there is: during generation it is emptier.",
        "budget.past_context": '<span style="color:#8a4b00">⚠ R is past {model}\'s context ({context:,} tokens): the '
                               "{extra:,} extra tokens reserved per sequence are never used.</span>",
        "budget.over": '<span style="color:#b00">Serving {wanted} at once needs {needed}, <b>{over}</b> over the '
                       "budget: from sequence {first} on, they do not fit. The budget check refuses them before "
                       "allocating, rather than running out of GPU memory (OOM) while allocating.</span>",
        "budget.fits": "Serving {wanted} at once needs {needed}: it fits, with {left} left in the budget.",
        "budget.paged": "Compare paging on demand (blocks of {page} tokens, only the blocks in use): the same memory "
                        "holds about <b>{capacity:.1f}</b> such requests on average, and truncates none.",
        "budget.no_fit": "{gpu}: {why}",
        "refusal.gpu_where": "this GPU has only",
        "refusal.cpu_where": "this machine has only",
        "refusal.gpu_memory": "GPU memory",
        "refusal.cpu_memory": "memory",
        "refusal.line": "kvlab refuses to allocate: a cache of batch B = {batch:,} sequences of {seq_len:,} tokens "
                        "each needs {requested}, and {where} {free} of {memory} free",
        "refusal.html": "<p><b>{line}</b>: nothing was allocated, and the Jupyter kernel is fine.</p><details><summary>"
                        "Details: the ValueError the API raised, word for word. The <code>{argument}</code> it starts "
                        "with is the argument it suggests making smaller; {batch:,} is the batch size B (the sequences "
                        "to cache at once): one sequence's cache on the demo model is only {per_sequence}, so it takes "
                        "this many to make a cache twice the free memory. The message also works out what would fit: "
                        "how many sequences, or how many tokens each for this many sequences. The message:</summary>"
                        "<p><code>{message}</code></p></details>",
        "card.kv.label": "Control: the correct KVCache",
        "card.kv.explanation": "This is kvlab's KVCache, with no bug: at every step the logits differ from the uncached "
                               "reference only by float rounding (under 1e-5), and the generated tokens are the same.",
        "card.kv.fix": "Nothing to fix.",
        "card.rope_offset.label": "Cache A",
        "card.rope_offset.explanation": "When a new token's K is stored, the rotary position embedding (RoPE) uses "
                                        "positions 0, 1, 2… instead of its real positions in the sequence, length, "
                                        "length + 1…: the position offset is missing when K is written. The prefill "
                                        "starts at position 0, so step 1 is entirely right; from step 2 (the first "
                                        "decode) on, every new K claims to be at position 0, and the relative "
                                        "positions in the attention scores are all wrong. When the model is very "
                                        "sure, wrong logits may still pick the same token, so the tokens often change "
                                        "a few steps later.",
        "card.rope_offset.fix": "Rotate K at positions = length + arange(T) (kvlab's rope_and_mask(start=cache.length, "
                                "...)).",
        "card.no_reset.label": "Cache B",
        "card.no_reset.explanation": "reset() forgets to set length to 0. After serving the previous request "
                                     "(\"{previous}\"), the same cache goes on to serve this prompt: the new prompt "
                                     "is appended after the previous request's tokens, so it sees the previous "
                                     "request's contents and its position encoding starts at the wrong place. So the "
                                     "logits differ from step 1 on; a brand-new cache starts at length = 0 and is "
                                     "entirely right (try unticking \"{reuse}\").",
        "card.no_reset.fix": "Write self.length = 0 in reset() (the storage itself can stay for reuse: reads look only "
                             "at the first length positions).",
        "card.k_as_v.label": "Cache C",
        "card.k_as_v.explanation": "Writing the cache puts K where V belongs (a letter left unchanged after copy and "
                                   "paste). Attention averages \"K\" with its weights, the output is wrong through "
                                   "and through, and it goes wrong, badly, already at step 1 (the prefill).",
        "card.k_as_v.fix": "self.v[layer, :, :, length:end] = v (not = k).",
        "card.off_by_one.label": "Cache D",
        "card.off_by_one.explanation": "A new token is written at length − 1 instead of length: \"the index of the "
                                       "last stored token\" is taken for \"the next free slot\". The prefill writes "
                                       "0 … P−1 (P is the prompt's token count), and step 1 is right. The first "
                                       "decode writes the new token at P−1, overwriting the K/V of the prompt's last "
                                       "token; from then on every new token lands one slot early, and the last slot "
                                       "attention reads (length) has never been written: zeros in a brand-new cache, "
                                       "the previous request's leftovers in a reused one. The result: the prompt's "
                                       "last token is lost, and at every step attention also reads one fake token.",
        "card.off_by_one.fix": "The slots written are [length, length + T): start = self.length.",
        "card.one_slot.label": "Cache E",
        "card.one_slot.explanation": "Every layer reads and writes layer 0's slot (the layer index is forgotten). "
                                     "Within one forward pass, each layer writes the new tokens before reading, so "
                                     "the prefill (step 1) happens to be right; from the first decode on, the old "
                                     "tokens' K/V every layer sees are the ones the last layer wrote, not its own.",
        "card.one_slot.fix": "Read and write self.k[layer] / self.v[layer]: each layer has a cache of its own.",
        "lab.line_same": "{label}: all {steps} steps match the reference (logit differences all within float rounding)",
        "lab.tokens_same": "the tokens all match",
        "lab.tokens_from": "the tokens differ from step {step} on",
        "lab.line": "{label}: {tokens}, the logits drift from step {logit} on",
        "lab.step_header": "Step",
        "lab.prompt_header": "Prompt",
        "lab.reference_row": "No cache (reference)",
        "lab.teacher_forcing": "The \"No cache (reference)\" row is teacher forcing: at each step the model without a "
                               "cache reads <b>the text this cache has written so far</b> and we see which token it "
                               "picks, so at every step the two rows compare one and the same input; once the cache "
                               "has gone astray, the reference is continuing a text gone astray, so this row need "
                               "not read well by itself. Without a cache, the model writing on its own gives: "
                               "\"{own}\"",
        "lab.served_reused": "served after a previous request, \"{previous}\", with reset() in between",
        "lab.served_fresh": "served with a brand-new cache",
        "lab.intro": "Prompt \"{prompt}\", {served}; at every step compared with the next token the model picks "
                     "without a cache when it reads the same text (what this cache has written so far):",
        "lab.all_same": "<b>{label}: all {steps} steps match</b>; largest logit difference {diff:.1e}",
        "lab.hidden": "These settings happen not to expose the bug, but the bug is still there: try another prompt, "
                      "more tokens, or changing \"{reuse}\".",
        "lab.differs": "<b>{label}: differs from step {step} on</b>: the reference \"{reference}\", this cache "
                       "\"{output}\"; the logits leave float rounding behind from step {logit} on; in {differing} "
                       "of the {steps} steps the token picked differs from the reference",
        "lab.reveal": "<b>Explanation:</b> {explanation}<br><b>Fix:</b> {fix}<br><b>Code</b> (the methods this cache "
                      "overrides): {methods}",
        "lab.guess": "<i>Guess where the bug is first, then tick \"{reveal}\".</i>",
        "summary.head": "<table><thead><tr><th>Section</th><th>Measured here (just computed in this notebook)</th>"
                        "<th>Conclusion</th></tr></thead>",
        "summary.3_1": "3.1 Autoregressive decoding: memory for time",
        "summary.3_1.measured": "Median step over the last 1/4 of the decode steps (t = {tail}): no cache {none:.2f} ms, "
                                "with a cache {kv:.2f} ms (no cache takes {ratio:.1f} times as long); the price is the "
                                "{held} the cache holds",
        "summary.3_1.conclusion": "Cache the old tokens' K/V and compute only the new token at each step: repeated "
                                  "computation becomes incremental",
        "summary.3_2": "3.2 The layout L×B×H×S×D",
        "summary.3_2.measured": "The demo model's cache (L, B, H, S, D) = ({L}, {B}, {H}, {S}, {D}): {shape} = "
                                "{formula:,} B; the trace records {written:,} B",
        "summary.3_2.conclusion": "Cache size = 2 (K and V) × L × B × H × S × D × bytes per element, linear in B and S",
        "summary.3_3": "3.3 Prefill and decode",
        "summary.3_3.measured": "One prefill pass over {prompt_len} tokens: {prefill} ({per_token:.3f} ms per token); "
                                "each decode step after it (t = {lens}): median {decode}, for just 1 token. A different "
                                "length from the cached steps in the 3.1 row, and not the same measurement",
        "summary.3_3.conclusion": "A prefill processes the whole prompt in one forward pass; a decode step yields just "
                                  "one token, and every step reads the weights and the cache once",
        "summary.3_4": "3.4 LLaMA-7B's memory",
        "summary.3_4.measured": "S = 2048, B = 1, FP16: {llama} (the original text says 0.50 GB); {gpu} planned at "
                                "{usable:g}: after the weights, {capacity} sequences reserving {reserved:,} tokens each "
                                "fit",
        "summary.3_4.conclusion": "Count the weights first, then how many tokens and sequences the usable memory holds",
        "summary.scenario_part": "{spread}: {idle:.0%} idle, {capacity} fixed vs about {paged:.1f} paged",
        "summary.part_sep": "; ",
        "summary.scenarios": "Use cases",
        "summary.scenarios.measured": "{gpu} + {model}, each sequence reserving the whole context, {reserved:,}: {parts}",
        "summary.scenarios.conclusion": "The closer requests come to the context length (long-document Q&A), the less "
                                        "a fixed reservation wastes and the less paging gains; the shorter and more "
                                        "spread out requests are against the reservation (single-turn Q&A, "
                                        "multi-turn chat), the more paging saves",
        "summary.check_sep": ", ",
        "summary.plan": "reserving {reserved:,} → {capacity} sequences, {idle:.0%} idle, {too_long:.1%} of requests do "
                        "not fit",
        "summary.step": "{label} step {step}",
        "summary.step_sep": ", ",
        "summary.m1": "Misconception 1: the cache is part of the parameters",
        "summary.all_same": " all unchanged",
        "summary.changed": " changed",
        "summary.all_equal": " all equal to",
        "summary.not_equal": " not equal to",
        "summary.m1.measured": "{runs} generations (B × S = {checks}): parameter checksums{same}; cache bytes{exact} "
                               "B × S × {per_token}; {length} tokens after reset()",
        "summary.m1.conclusion": "The cache is a temporary tensor allocated separately at inference time and grows with "
                                 "the input; not one byte of the weights changes",
        "summary.m2": "Misconception 2: caching K alone",
        "summary.m2.measured": "Step time over the last 1/4 of the decode steps: {times}; tokens whose V the last step "
                               "projects (no cache / K only / with a cache): {none} / {k_only} / {kv}",
        "summary.m2.conclusion": "V must be cached along with K; otherwise every step recomputes the whole prefix",
        "summary.m3": "Misconception 3: the bigger the cache, the better",
        "summary.m3.measured": "{gpu} + {model} (FP16, planned at {usable:g}): {plans}",
        "summary.m3.conclusion": "How much to reserve depends on the memory budget and the spread of request lengths; "
                                 "paging on demand (PagedAttention) keeps the idle part within each sequence's last "
                                 "block",
        "summary.lab": "Find the bug",
        "summary.lab_same": "all the same",
        "summary.lab_differs": "different!",
        "summary.lab.measured": "On the prompt \"{prompt}\", the {bugs} broken caches first pick a different token "
                                "at: {steps}; the correct cache: {control}",
        "summary.lab.conclusion": "A cache bug raises no error, it silently changes the output: only comparing step by "
                                  "step with the uncached reference finds it",
    },
})
_LABEL_KEYS = {PANELS.text(key, "zh"): key for key in PANELS.texts["zh"] if key.startswith("label.")}


def label(constant: str) -> str:
    """A control's label (one of the ``*_LABEL`` constants, the Chinese label) in the course's language."""
    return PANELS.say(_LABEL_KEYS[constant])


def shown_text(text: str, prefix: str) -> str:
    """A Chinese name this lesson keeps as data (a request spread's label or note) in the course's language; a text
    PANELS does not hold under ``prefix`` (one a learner made up) is shown as it is."""
    key = next((k for k in PANELS.texts["zh"] if k.startswith(prefix) and PANELS.text(k, "zh") == text), None)
    return PANELS.say(key) if key else text


class ShownText(str):
    """A text constant (the Chinese one, as ``str``) that formats in the course's language: ``COUNTING`` prints through
    ``lesson.say(..., counting=lesson.COUNTING)`` in either language."""

    def __new__(cls, key: str):
        self = super().__new__(cls, PANELS.text(key, "zh"))
        self.key = key
        return self

    def __format__(self, spec: str) -> str:
        return format(PANELS.say(self.key), spec)

    def __str__(self) -> str:
        return PANELS.say(self.key)


class ShownNames(Mapping):
    """``FLOP_NAMES[mode]``: a name in the course's language when it is asked for (a dict built at import would keep
    the names of the language before the notebook set its own)."""

    def __init__(self, prefix: str, keys: tuple[str, ...]):
        self.prefix, self.keys_ = prefix, keys

    def __getitem__(self, key: str) -> str:
        if key not in self.keys_:
            raise KeyError(key)
        return PANELS.say(f"{self.prefix}.{key}")

    def __iter__(self):
        return iter(self.keys_)

    def __len__(self) -> int:
        return len(self.keys_)

    def __repr__(self) -> str:
        return f"ShownNames({dict(self)!r})"
