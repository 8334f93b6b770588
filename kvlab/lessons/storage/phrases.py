"""What chapter 3.2's code cells print, in both languages (``lesson.say(key, **fields)``), and the prompts they feed
the demo model (``lesson.PROMPTS.say("first")``).

The notebook's code cells hold no prose: each printed line and check description comes from :data:`CELLS`, and each
prompt from :data:`PROMPTS`, so the English edition runs the same cells with ``kvlab.set_language("en")``."""
from __future__ import annotations

from ...phrases import Phrasebook

CELLS = Phrasebook("storage.cells", {
    "zh": {
        # setup
        "device": "运行设备：{device}",
        # 1. the cache tensor of a real run
        "prompt_lengths": "两个提示词各 {prompt_len} 个 token，再生成 {new_tokens} 个新 token",
        "cache_shape": "cache.k.shape = {shape}  ← (L, B, H, S, D)；cache.v 形状相同",
        "dtype_device": "dtype = {dtype}，device = {device}，已存 token 数 cache.length = {length} / S = {S}",
        "layer0_view": "第 0 层的视图 cache.k[0]：{shape}  ← (B, H, S, D)，连还空着的位置一起",
        "filled_view": "只看已填充部分 cache.layer_view(0)：K {k_shape}，V {v_shape}  ← (B, H, length, D)",
        "heads": "查询头 {n_head} 个，KV 头 H = {n_kv_head} 个：每 {group} 个查询头共用一组 K/V",
        "hf_layer0": "transformers 第 0 层 K：{hf_shape}；kvlab cache.layer_view(0) 的 K：{k_shape}",
        # 2. the bytes: the formula against the tensors
        "formula": "公式：2 × {L} × {B} × {H} × {S} × {D} × {element} B = {formula:,} B = {formula_text}",
        "measured": "实测：cache.k 与 cache.v 共 {measured:,} B = {measured_text}",
        "used": "其中已经填了 token 的 {length} 个位置：{used}（同一个公式取 S = {length}）",
        "kvlab_bytes": "kvlab：{bytes:,} B = {bytes_text}",
        # 3. preallocation against concatenation (the checks under the growth panel)
        "same_tokens": "两种缓存生成的 token 完全相同，测了至少 3 轮",
        "lengths_in_text": "下拉框里的长度就是正文说的 64、128、256",
        "weights_few_tokens": "全部权重只相当于几十个 token 的缓存",
        "real_weights_tokens": "真实模型（FP16）的权重相当于几千到上千万个 token 的缓存，最多的是 MLA 的 DeepSeek，"
                               "大多数在几万到几十万之间",
        "kv_allocates_once": "预分配只分配了一次（K 和 V 各一块），第 0 层的 K 始终是同一块",
        "dynamic_allocates_each_step": "逐步拼接每一步、每一层都分配新存储，第 0 层的 K 每步换一块",
        "kv_writes_once": "预分配每个 token 只写一次",
        "dynamic_rewrites": "逐步拼接第 t 步把已有的 t 个 token 全部重写：约 n²/2",
        "attends_stored": "kvlab 的注意力只读已存的 token",
        "hf_blocks": "DynamicCache 每步换一块，StaticCache 始终是同一块",
        "hf_attended": "DynamicCache 只含已存的 token，StaticCache 每步都是全部位置",
        "hf_same_tokens": "transformers 两种缓存每步选出的 token 都和 kvlab 一样",
        # 4. padding waste on the demo model
        "padding_demo": "演示模型，FP32：实际分配 {allocated}，其中真实 token 只占 {used}，浪费 {waste:.1%}；"
                        "每块 {block_size} 个 token 分页只需 {paged}",
    },
    "en": {
        "device": "Running on: {device}",
        "prompt_lengths": "Two prompts of {prompt_len} tokens each, then {new_tokens} new tokens generated",
        "cache_shape": "cache.k.shape = {shape}  ← (L, B, H, S, D); cache.v has the same shape",
        "dtype_device": "dtype = {dtype}, device = {device}, tokens stored: cache.length = {length} / S = {S}",
        "layer0_view": "Layer 0's view, cache.k[0]: {shape}  ← (B, H, S, D), empty slots included",
        "filled_view": "Just the filled part, cache.layer_view(0): K {k_shape}, V {v_shape}  ← (B, H, length, D)",
        "heads": "{n_head} query heads and H = {n_kv_head} KV heads: every {group} query heads share one set of K/V",
        "hf_layer0": "transformers, layer 0's K: {hf_shape}; kvlab's cache.layer_view(0) K: {k_shape}",
        "formula": "Formula: 2 × {L} × {B} × {H} × {S} × {D} × {element} B = {formula:,} B = {formula_text}",
        "measured": "Measured: cache.k and cache.v take {measured:,} B = {measured_text} together",
        "used": "Of that, the {length} positions already holding a token: {used} (the same formula with S = {length})",
        "kvlab_bytes": "kvlab: {bytes:,} B = {bytes_text}",
        "same_tokens": "Both caches generate exactly the same tokens, over at least 3 rounds",
        "lengths_in_text": "The dropdown offers the lengths the text names: 64, 128 and 256",
        "weights_few_tokens": "All of the model's weights take no more memory than a few dozen tokens of cache",
        "real_weights_tokens": "A real model's FP16 weights take as much memory as thousands to tens of millions of "
                               "tokens of cache; the most is DeepSeek with MLA, and most models fall between tens "
                               "of thousands and hundreds of thousands",
        "kv_allocates_once": "Preallocation allocates just once (one block for K, one for V); layer 0's K stays the "
                             "same block throughout",
        "dynamic_allocates_each_step": "Concatenation allocates new storage at every step in every layer; layer 0's "
                                       "K moves to a new block each step",
        "kv_writes_once": "Preallocation writes each token exactly once",
        "dynamic_rewrites": "At step t, concatenation copies all t tokens already stored again: about n²/2 in all",
        "attends_stored": "kvlab's attention reads only the tokens stored so far",
        "hf_blocks": "DynamicCache moves to a new block each step; StaticCache stays the same block",
        "hf_attended": "DynamicCache holds only the tokens stored so far; StaticCache hands attention every "
                       "position at every step",
        "hf_same_tokens": "Both transformers caches pick the same token as kvlab at every step",
        "padding_demo": "Demo model, FP32: {allocated} allocated, of which the real tokens use only {used}, so "
                        "{waste:.1%} is wasted; paging in blocks of {block_size} tokens needs only {paged}",
    },
})

# Two prompts of the same length in tokens (cell 3.2.1 checks it), each with a continuation that reads sensibly.
PROMPTS = Phrasebook("storage.prompts", {
    "zh": {"first": "人工智能", "second": "解码阶段"},
    "en": {"first": "A large language model", "second": "During decode"},
})

# What the lesson's panels, readouts and tables show (read when shown, never frozen at import: the notebook sets the
# language after importing kvlab). The controls' labels are keys "label.*"; the *_LABEL constants stay the Chinese ones.
TEXTS = Phrasebook("storage.texts", {
    "zh": {
        "kv_label": "预分配（kv）",
        "original_example": "原文示例",
        "example": "原文示例（L={L}、B=1、H={H}、S={S:,}、D={D}、{dtype}）",
        "gpu_memory": "{name} 的显存：{size}",
        # the controls
        "label.L": "层数 L",
        "label.H": "KV 头数 H",
        "label.D": "头维度 D",
        "label.S": "序列长度 S",
        "label.filled_pct": "已生成（%）",
        "label.batch": "批次 B",
        "label.dtype": "数据类型",
        "label.growth": "缓存最多存多少个 token",
        "label.lengths": "每条序列现在的长度（提示词 + 已生成）",
        "label.block": "分页块大小",
        "label.reserve": "每条序列为生成预留",
        "row.model": "模型的形状",
        "row.request": "这次请求",
        "bytes_follow": "形状取自上面的面板",
        # the shape and bytes panels
        "shape_html": "K 的形状（L, B, H, S, D）=（{L}, 1, {H}, {S}, {D}），V 与它同形。每个 token 在每一层的 K 里存 "
                      "H × D = {per_layer:,} 个数，所有层共 L × H × D = {per_token:,} 个，V 也一样多。<br>整个缓存（K 和 V）："
                      "2 × L × H × S × D = <b>{numbers:,} 个数</b>，{compared}。"
                      "<br>已生成 {filled:,} / {S:,} 个 token：所有层、所有头的前 {filled:,} 个位置已经写入。",
        "bytes_html": "2 × L × B × H × S × D × 每元素字节 = 2 × {L} × {B:,} × {H} × {S:,} × {D} × {element:g} B = "
                      "<b>{total:,} B{total_text}</b>，{compared}<br>每个 token（1 条序列，所有层的 K 和 V）：{per_token}；"
                      "已生成 {filled:,} / {S:,} 个 token，已用 {used}{quantized}",
        "quantized": "；量化缓存另存的缩放系数不在其内",
        # the growth panel
        "growth_choice": "{n} 个 token（缓存最大 {size}）",
        "growth_took": "<br>这次测量一共用了 {took:.0f} 秒。",
        "no_transformers": "这次没有要求运行 transformers",
        "model_line": "模型：{n_layer} 层，每层 {n_kv_head} 个 {head_dim} 维的 KV 头，d_model = {d_model}；每个 token 的"
                      "缓存 {per_token}（FP32），全部权重 {weights}，只相当于 {weight_tokens:.0f} 个 token 的缓存。"
                      "每种缓存生成 {generated} 个 token（提示词 {prompt} 个，缓存最多存 {longest} 个），"
                      "交替运行 {repeats} 轮（{on}）。",
        "kv_line": "{label}：共 {allocations} 次分配，写入 {written}，第 0 层的 K 始终是同一块（{blocks} 块）。",
        "dynamic_line": "{label}：共 {allocations:,} 次分配，写入 {written}，第 0 层的 K 换了 {blocks} 块。",
        "hf_dynamic_line": "transformers DynamicCache：第 0 层的 K 换了 {blocks} 块，缓存张量的长度从 {first} 个位置长到 "
                           "{last} 个。",
        "hf_static_line": "transformers StaticCache：第 0 层的 K 始终是 {blocks} 块，缓存张量从第一步起就是全部 {all} 个位置"
                          "（没填的位置在注意力里用掩码遮住）。",
        "next_cell": "各种缓存每次前向的耗时谁快谁慢，按这次测到的数字写在下一格的输出里（重新测量之后，再运行下一格）。",
        "gpu_memory_word": "显存",
        "cpu_memory_word": "内存",
        "llc_unknown": "缓存最大 {peak}（K 和 V，所有层）；没有读到这台机器 {where} 最后一级缓存的大小，"
                       "无法判断整个缓存装不装得进去。",
        "llc_head": "缓存最大 {peak}（K 和 V，所有层），这台机器 {where} 的 {level} 缓存是 {size}（读自 {source}）。"
                    "逐步拼接的一步要碰到旧的一份缓存、新拷贝的一份，再加上 {weights} 权重："
                    "缓存里有 {t} 个 token 时共 {touched}",
        "llc_fits": "，装得进 {level}：拷贝的数据不必到{memory}里读写，这里多花的就是拷贝和分配本身"
                    "（下一格会测出来）。",
        "llc_exceeds": "，是 {level} 的{times}：缓存里超过约 {tokens:,} 个 token 后就装不进 {level}，此后每步拷贝的数据越来越多要到"
                       "{memory}里读写。",
        "copy": "逐步拼接每步拷贝的数据（数出来的，和机器无关）：前四分之一的解码步（缓存里 {e_from}–{e_to} "
                "个 token）每步 {e_min}–{e_max}，后半程（缓存里 {l_from}–{l_to} 个 token）每步 {l_min}–{l_max}；"
                "按中位数，后半程每步要拷贝的数据是前四分之一的{times}。",
        "times_unknown": "多少倍算不出来（有一方是 0）",
        "times_one": "1 倍",
        # the padding panel
        "paged_less": "只需 {paged}，比按最长者分配少 {diff}",
        "paged_more": "反而需要 {paged}，比按最长者分配多 {diff}（分页按整块分配，每条序列最后一块没填满的槽位也算在内，"
                      "这里比按最长者分配留下的空位还多）",
        "paged_same": "同样需要 {paged}",
        "reserved": "，每条再为生成预留 {reserve:,} 个",
        "padding_html": "B = {batch} 条序列，现在最长 {longest:,} 个 token{reserved}：按最长者分配 {batch} × "
                        "{padded:,} = {allocated:,} 个槽位，真正用到 {used:,} 个，<b>浪费 {waste:.1%}</b>。<br>"
                        "分页：{blocks:,} 块 × {block_size} = {paged_slots:,} 个槽位，<b>浪费 {paged_waste:.1%}</b>"
                        "（只在每条序列的最后一块里；块在生成时按需领取，不必预留）。<br>"
                        "换成 {model}（FP16，每个 token {per_slot}）：按最长者分配 {allocated_bytes}，只用 {used_bytes}；"
                        "按每块 {block_size} 个 token 分页{paged}。",
        # the real models' table
        "past_context": "＊",
        "table_head": "<tr><th>模型</th><th>训练上下文</th><th>层数 L</th><th>查询头</th><th>KV 头 H</th><th>头维度 D</th>"
                      "<th>隐藏维度</th><th>每个 token（FP16）</th>",
        "table_sep": "；",
        "gqa_note": "{model} 每 {group} 个查询头共用一组 K/V，每个 token 的缓存是 {twin} 的 1/{ratio:g}",
        "table_note": "B = 1，FP16。{mark} 超过了该模型训练时的上下文长度：模型没在这么长的序列上训练过（GPT-2 的位置嵌入只有 "
                      "1,024 个，更长的序列根本输入不了），这一格只是照公式算出的字节数。{notes}。",
        "head_dim_case": "{name} 有 {n_head} 个查询头、每个 {head_dim} 维，{n_head} × {head_dim} = {product:,}，"
                         "而隐藏维度是 {hidden:,}",
        "head_dim_note": "头维度 ≠ 隐藏维度 / 查询头数的真实模型：{cases}。",
    },
    "en": {
        "kv_label": "preallocation (kv)",
        "original_example": "the original's example",
        "example": "the original's example (L={L}, B=1, H={H}, S={S:,}, D={D}, {dtype})",
        "gpu_memory": "{name} memory: {size}",
        "label.L": "Layers L",
        "label.H": "KV heads H",
        "label.D": "Head size D",
        "label.S": "Sequence length S",
        "label.filled_pct": "Generated (%)",
        "label.batch": "Batch B",
        "label.dtype": "Data type",
        "label.growth": "Most tokens the cache holds",
        "label.lengths": "Each sequence's length now (prompt + generated)",
        "label.block": "Block size",
        "label.reserve": "Reserved per sequence for generation",
        "row.model": "The model's shape",
        "row.request": "This request",
        "bytes_follow": "The shape comes from the panel above",
        "shape_html": "K's shape (L, B, H, S, D) = ({L}, 1, {H}, {S}, {D}); V has the same shape. Each token stores "
                      "H × D = {per_layer:,} numbers in each layer's K, L × H × D = {per_token:,} across all layers, "
                      "and as many again in V.<br>The whole cache (K and V): 2 × L × H × S × D = "
                      "<b>{numbers:,} numbers</b>, {compared}.<br>{filled:,} / {S:,} tokens generated: the first "
                      "{filled:,} positions of every layer and every head are written.",
        "bytes_html": "2 × L × B × H × S × D × bytes per element = 2 × {L} × {B:,} × {H} × {S:,} × {D} × {element:g} "
                      "B = <b>{total:,} B{total_text}</b>, {compared}<br>Per token (one sequence, K and V of all "
                      "layers): {per_token}; {filled:,} / {S:,} tokens generated, {used} in use{quantized}",
        "quantized": "; the scales a quantized cache stores besides are not counted",
        "growth_choice": "{n} tokens (cache up to {size})",
        "growth_took": "<br>This measurement took {took:.0f} s in all.",
        "no_transformers": "transformers was not asked for this time",
        "model_line": "Model: {n_layer} layers, each with {n_kv_head} KV heads of {head_dim} dimensions, but a model "
                      "width of only d_model = {d_model} (each layer projects its {d_model} numbers out to the "
                      "heads); the cache takes {per_token} per token (FP32), while all the weights, {weights}, "
                      "take only as much as {weight_tokens:.0f} tokens of cache. Each cache generates {generated} "
                      "tokens (a prompt of {prompt}; the cache holds at most {longest}), in {repeats} alternating "
                      "rounds ({on}).",
        "kv_line": "{label}: {allocations} allocations in all, {written} written; layer 0's K stays the same block "
                   "({blocks} in all).",
        "dynamic_line": "{label}: {allocations:,} allocations in all, {written} written; layer 0's K went through "
                        "{blocks} blocks.",
        "hf_dynamic_line": "transformers DynamicCache: layer 0's K went through {blocks} blocks, the cache tensor "
                           "growing from {first} positions to {last}.",
        "hf_static_line": "transformers StaticCache: layer 0's K stays {blocks} block, and the cache tensor holds "
                          "all {all} positions from the first step (attention masks out the ones not yet filled).",
        "next_cell": "Which cache's forward passes are faster, by this run's numbers, is written in the next cell's "
                     "output (after measuring again, run the next cell again).",
        "gpu_memory_word": "GPU memory",
        "cpu_memory_word": "main memory",
        "llc_unknown": "The cache peaks at {peak} (K and V, all layers); the size of this machine's {where} "
                       "last-level cache could not be read, so there is no telling whether the whole cache fits in it.",
        "llc_head": "The cache peaks at {peak} (K and V, all layers); this machine's {where} {level} cache is {size} "
                    "(read from {source}). A concatenating step touches the old copy of the cache, the new copy and "
                    "{weights} of weights: {touched} in all with {t} tokens in the cache",
        "llc_fits": ", which fits in {level}: the copies never have to go out to {memory}, so what they cost here "
                    "is the copying and allocating itself (the next cell measures it).",
        "llc_exceeds": ", {times} the size of {level}: past about {tokens:,} tokens in the cache it no longer fits in "
                       "{level}, and from then on more and more of each step's copy goes out to {memory}.",
        "copy": "What concatenation copies per step (counted, so the same on any machine): {e_min}–{e_max} per step "
                "in the first quarter of the decode steps ({e_from}–{e_to} tokens in the cache), {l_min}–{l_max} "
                "per step in the second half ({l_from}–{l_to} tokens in the cache); by the medians, a step in the "
                "second half copies {times} the data of a step in the first quarter.",
        "times_unknown": "an unknown multiple (one side is 0) of",
        "times_one": "1×",
        "paged_less": "needs only {paged}, {diff} less than allocating for the longest",
        "paged_more": "needs {paged} instead, {diff} more than allocating for the longest (paging allocates whole "
                      "blocks, so the unfilled end of each sequence's last block counts too, and here those empty "
                      "slots outnumber the ones allocating for the longest leaves)",
        "paged_same": "needs the same {paged}",
        "reserved": ", plus {reserve:,} reserved per sequence for generation",
        "padding_html": "B = {batch}, the longest sequence now {longest:,} tokens{reserved}: allocating for the longest "
                        "takes {batch} × {padded:,} = {allocated:,} slots, of which {used:,} are used, "
                        "<b>{waste:.1%} wasted</b>.<br>Paged (block size {block_size}): {blocks:,} × {block_size} = "
                        "{paged_slots:,} slots, <b>{paged_waste:.1%} wasted</b> (only in each sequence's last block; blocks are taken "
                        "as generation needs them, nothing is reserved).<br>For {model} (FP16, {per_slot} per "
                        "token): allocating for the longest takes {allocated_bytes}, of which {used_bytes} is "
                        "used; paged with a block size of {block_size}, the batch {paged}.",
        "past_context": "*",
        "table_head": "<tr><th>Model</th><th>Trained context</th><th>Layers L</th><th>Query heads</th>"
                      "<th>KV heads H</th><th>Head size D</th><th>Hidden size</th><th>Per token (FP16)</th>",
        "table_sep": "; ",
        "gqa_note": "{model} shares one set of K/V among every {group} query heads, so its cache per token is "
                    "1/{ratio:g} of {twin}'s",
        "table_note": "B = 1, FP16. {mark} Past the model's trained context: the model was never trained on "
                      "sequences this long (GPT-2 has only 1,024 position embeddings, so a longer sequence cannot "
                      "even be fed in); the cell is only the bytes the formula gives. {notes}.",
        "head_dim_case": "{name} has {n_head} query heads of {head_dim} dimensions each, {n_head} × {head_dim} = "
                         "{product:,}, while its hidden size is {hidden:,}",
        "head_dim_note": "Real models whose head size ≠ hidden size / query heads: {cases}.",
    },
})

say = CELLS.say
