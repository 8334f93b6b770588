"""What chapter 3.5's code cells print (``CELLS``) and the prompts they give the demo model (``PROMPTS``), in
both of the course's languages: the cells hold code only and read their text from here (issue 34)."""
from __future__ import annotations

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
        "minimal_k_only_share": "最省的只缓存 K（旧 token 的 V 只在最后一层重算）：演示模型约 3/4，LLaMA-7B 约 90%",
        "minimal_still_100x": "即使这样，也比完整缓存多两个数量级以上的计算",
        "layer_change": "第 {layer} 层：K 变了 {k:.1%}，V 变了 {v:.1%}（各自相对 ‖K‖、‖V‖）",
        "layer0_unchanged": "第 0 层：V 只取决于这个 token，K 只取决于这个 token 和它的位置；改了第一个 token，两者都不变",
        "later_layers_change": "第 1 层起：K、V 都变了 30% 以上，它们取决于整个前缀",
        "query_check": "第 {qc.layer} 层，t = {qc.t}：最后一个 token 的输出变化 {qc.last_row_change:.1e}，"
                       "之前各行的输出变化 {qc.earlier_rows_change:.3g}",
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
        "minimal_note": "Note: even the leanest K-only cache (old tokens' V computed at the last layer only) still "
                        "does {share:.0%} of the no-cache work ({llama_share:.0%} at LLaMA-7B's shape), "
                        "{times:,} times the work with a cache",
        "llama_shape_params": "This shape has exactly LLaMA-7B's parameter count",
        "demo_k_only_over_95": "On the demo model, a K-only cache still does over 95% of the no-cache work",
        "llama_k_only_about_92": "At LLaMA-7B's shape, about 92% (between 90% and 95%)",
        "minimal_k_only_share": "The leanest K-only cache (old tokens' V recomputed at the last layer only): about 3/4 "
                                "on the demo model, about 90% at LLaMA-7B's shape",
        "minimal_still_100x": "Even that is over two orders of magnitude more work than a full cache",
        "layer_change": "Layer {layer}: K changed by {k:.1%}, V by {v:.1%} (relative to ‖K‖ and ‖V‖)",
        "layer0_unchanged": "Layer 0: V depends on this token alone, K on this token and its position; changing "
                            "the first token leaves both as they were",
        "later_layers_change": "From layer 1 on, K and V both change by more than 30%: they depend on the whole prefix",
        "query_check": "Layer {qc.layer}, t = {qc.t}: the last token's output changed by {qc.last_row_change:.1e}, "
                       "the earlier rows' output by {qc.earlier_rows_change:.3g}",
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
    },
    "en": {
        "running": "Artificial",  # 1 token; the English model continues it with " intelligence"
        "prefix": "Artificial intelligence models",  # 3 tokens; every layer from 1 on moves K and V by over 50%
    },
})

say = CELLS.say
