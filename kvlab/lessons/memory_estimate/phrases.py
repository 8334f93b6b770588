"""What chapter 3.4's code cells print, in both languages: readouts and the descriptions of ``confirm``'s checks.

The cells hold only code (``lesson.say(key, **fields)``); the text for each key lives here, with the same keys and
format fields in Chinese and English (``tests/test_phrases.py``). The numbers a check's description states (32.0 MB,
1/64, 20 GiB ...) are the numbers its condition checks, so they are written into both templates."""
from __future__ import annotations

from ...phrases import Phrasebook

CELLS = Phrasebook("memory_estimate.cells", {
    "zh": {
        # setup
        "device": "运行设备：{device}",
        # the original code, checked by kvlab
        "kvlab_bytes": "kvlab：每层 {per_layer:,} B = {per_layer_size}；{layers} 层共 {total:,} B = {total_size}",
        "preset_is_chapter_model": "MODEL_PRESETS 里的 LLaMA-7B 正是原文的 L = 32、H = 32、D = 128、隐藏维度 4096",
        "per_layer_three_agree": "每层的字节数：原文的代码、kvlab 的模型预设、3.2 节的公式三者完全相同",
        "total_three_agree": "总字节数：三者也完全相同",
        "code_prints_not_comment": "原文的代码打印的是 32.0 MB 和 1.00 GB，不是注释里的 16.0 MB 和 0.50 GB",
        # the chapter's four figures
        "three_figures_half": "每层、总计、8192 个 token 这三个数字，原文写的都恰好是正确值的一半",
        "three_figures_wrong": "所以这三个数字都不成立",
        "over_16gb_hypothetical_only": "「超过16GB」对原文假设的 70B 成立，对真实的 Llama-3-70B 不成立",
        "hypothetical_is_8x": "假设的 70B 是 20 GiB，正好是 Llama-3-70B 的 8 倍",
        "long_s_past_context": "8192 个 token 时是 4 GiB，这个长度超过了 LLaMA-7B 发布时的上下文（⚠）",
        "no_warning_70b": "两个 70B 的行都没有 ⚠",
        # why exactly half
        "as_written_prints": "原样的代码打印 32.0 MB 和 1.00 GB",
        "five_changes_print_comment": "S 改成 1024、只存 K、每元素 1 字节、H 减半、D 减半：每一种都恰好打印出注释里的两个数",
        "half_l_total_only": "L 减半只让总数对得上，每层仍是 32.0 MB",
        "exactly_five_changes": "表里恰好有五种改动得到注释里的两个数",
        "comment_times_4": "注释里的 0.50 GB 乘 4 正好是原文的「约2GB」，而 8192 正好是 2048 的 4 倍",
        # GB or GiB
        "gib_vs_gb": "这 1 GiB 换成 GB 是 1.07 GB：两种单位只差约 7%，远不是 2 倍",
        # the 70B: 64 KV heads or 8
        "two_readings": "按 S = 2048 读是 5 GiB，不到 16 GB；按 S = 8192 读是 20 GiB，超过 16 GB",
        "five_times_7b": "同样长度下 70B 的缓存是 LLaMA-7B 的 5 倍；原文的「约2GB」乘 5 只有 10 GB，改正后的 4 GiB 乘 5 才超过 16 GB",
        "same_shape_models": "和原文假设的 70B 缓存形状相同的真实模型是 LLaMA-65B 和 Qwen1.5-72B",
        "same_shape_heads": "它们都是 80 层、64 个查询头、64 个 KV 头、头维度 128",
        "gqa_70b_heads": "Llama-2-70B 和 Llama-3-70B 都是 64 个查询头、只有 8 个 KV 头（GQA）",
        "shrinks_by_kv_heads": "每一对里，缓存恰好按 KV 头数之比缩小",
        "only_llama2_past_context": "S = 8192 只超过了 Llama-2-7B 的上下文",
        # the calculator
        "calculator_limits": "序列长度最大 {max_seq_len:,} 个 token；Mistral-7B 和 Gemma-2-9B 的窗口都是 {window:,} 个 token；"
                             "DeepSeek-V3 每层每个 token 存 {lora_rank} 维压缩向量 + {rope_dim} 维 RoPE 键 = {latent_dim} 个数",
        "over_20_real_models": "收录的真实模型超过 20 个",
        "falcon_one_64th": "Falcon-7B 每个 token 的缓存是 LLaMA-7B 的 1/64：1 个 KV 头（而不是 32 个），头维度 64（而不是 128）",
        "405b_per_token": "Llama-3.1-405B 每个 token 504 KiB，比 LLaMA-7B 的 512 KiB 还少",
        "overlapping_lines_visible": "上图里 405B 是虚线、LLaMA-7B 是粗线，两条重合的线都看得见",
        "mistral_plain_formula_double": "8192 个 token 时，普通公式给 Mistral-7B 算出的是实际的 2 倍",
        "cache_over_weights_128k": "128K 个 token 时，Llama-3.1-8B 一条序列的缓存比它的 FP16 权重还大",
        "deepseek_half_128k": "128K 个 token 时，DeepSeek-V3 的缓存约为 Llama-3.1-8B 的一半（0.45 到 0.6 倍之间）",
        # GPU memory
        "at_most_marketed_gib": "表里每张卡的总量都不超过把标称数字当作 GiB 读的大小",
        "a100_80_gib": "A100 80 GB 的总量正好是 80 GiB",
        "t4_ecc": "表里 T4 的总量是 16 GiB 的 15/16：开着 ECC，1/16 留给校验位",
        "usable_default": "显存使用比例默认 0.9，和 vLLM 的 gpu_memory_utilization 一样",
        # will it fit on a T4
        "t4_torch_total": "PyTorch 在 Colab T4 上报告的总容量约 {torch_total_gib} GiB，Llama-3-8B 的 FP16 权重是 {weights}",
        "llama7b_no_sequence": "LLaMA-7B 的 FP16 权重放得下，但剩下的连一条 2048 个 token 的序列都放不下",
        "sequence_is_1_gib": "这条序列的缓存正是上文算出的 1 GiB",
        "llama3_fp16_too_big": "Llama-3-8B 的 FP16 权重放不下，比 PyTorch 报告的总容量还大",
        "int8_twenty_odd": "换成 int8 权重后，能放下二十多条 2048 个 token 的序列",
        "int8_past_context": "int8 的最长上下文超过 Llama-3-8B 的上下文，读数注明这只是按公式算出的容量",
        "gqa_not_int8": "Llama-3-8B 的 8 个 KV 头让每条序列的缓存只有 LLaMA-7B 的 1/4：大多数的条数来自 GQA，不是 int8",
        "panel_default_case": "上面面板的默认设定就是第一种情况",
        # the formula against real memory
        "one_eighth": "只取 1/8 的 token，字节数也正好是 1 GiB 的 1/8",
        "multiples_of_512": "K、V 各自都是 512 字节的整数倍，所以 CUDA 分配器取整后一个字节也不多",
        "measured_only_on_gpu": "只有在 GPU（或 MPS）上才是分配器的实测",
    },
    "en": {
        # setup
        "device": "Device: {device}",
        # the original code, checked by kvlab
        "kvlab_bytes": "kvlab: {per_layer:,} B = {per_layer_size} per layer; {total:,} B = {total_size} for all "
                       "{layers} layers",
        "preset_is_chapter_model": "LLaMA-7B in MODEL_PRESETS has exactly the original chapter's L = 32, H = 32, "
                                   "D = 128 and hidden size 4096",
        "per_layer_three_agree": "Bytes per layer: the original code, kvlab's model preset and the formula from 3.2 "
                                 "give exactly the same number",
        "total_three_agree": "Total bytes: all three agree exactly as well",
        "code_prints_not_comment": "The original code prints 32.0 MB and 1.00 GB, not the 16.0 MB and 0.50 GB its "
                                   "comment shows",
        # the chapter's four figures
        "three_figures_half": "Per layer, in total and at 8192 tokens: each of the three figures the original chapter "
                              "gives is exactly half the correct value",
        "three_figures_wrong": "So none of the three figures holds",
        "over_16gb_hypothetical_only": "\"Over 16GB\" holds for the original chapter's hypothetical 70B, but not for "
                                       "the real Llama-3-70B",
        "hypothetical_is_8x": "The hypothetical 70B needs 20 GiB, exactly 8 times as much as Llama-3-70B",
        "long_s_past_context": "At 8192 tokens it is 4 GiB, and that length is past LLaMA-7B's context at release (⚠)",
        "no_warning_70b": "Neither 70B row carries a ⚠",
        # why exactly half
        "as_written_prints": "The code as written prints 32.0 MB and 1.00 GB",
        "five_changes_print_comment": "S set to 1024, K only, 1 byte per element, H halved, D halved: each of these "
                                      "prints exactly the comment's two numbers",
        "half_l_total_only": "Halving L matches only the total; per layer it is still 32.0 MB",
        "exactly_five_changes": "Exactly five changes in the table give the comment's two numbers",
        "comment_times_4": "The comment's 0.50 GB times 4 is exactly the original chapter's \"about 2GB\", and 8192 "
                           "is exactly 4 times 2048",
        # GB or GiB
        "gib_vs_gb": "This 1 GiB is 1.07 GB: the two units differ by only about 7%, nowhere near a factor of 2",
        # the 70B: 64 KV heads or 8
        "two_readings": "Read as S = 2048 it is 5 GiB, under 16 GB; read as S = 8192 it is 20 GiB, over 16 GB",
        "five_times_7b": "At the same length the 70B's cache is 5 times LLaMA-7B's; the original chapter's \"about "
                         "2GB\" times 5 is only 10 GB, and only the corrected 4 GiB times 5 exceeds 16 GB",
        "same_shape_models": "The real models whose cache has the same shape as the original chapter's hypothetical "
                             "70B are LLaMA-65B and Qwen1.5-72B",
        "same_shape_heads": "Both have 80 layers, 64 query heads, 64 KV heads and a head dimension of 128",
        "gqa_70b_heads": "Llama-2-70B and Llama-3-70B both have 64 query heads but only 8 KV heads (GQA)",
        "shrinks_by_kv_heads": "In each pair the cache shrinks by exactly the ratio of KV heads",
        "only_llama2_past_context": "S = 8192 is past the context of Llama-2-7B only",
        # the calculator
        "calculator_limits": "Sequence length goes up to {max_seq_len:,} tokens; Mistral-7B and Gemma-2-9B both "
                             "have a {window:,}-token window; per layer and per token, DeepSeek-V3 stores a "
                             "{lora_rank}-dim compressed vector + a {rope_dim}-dim RoPE key = {latent_dim} numbers",
        "over_20_real_models": "The presets include more than 20 real models",
        "falcon_one_64th": "Falcon-7B's cache per token is 1/64 of LLaMA-7B's: 1 KV head (not 32) and a head "
                           "dimension of 64 (not 128)",
        "405b_per_token": "Llama-3.1-405B needs 504 KiB per token, less than LLaMA-7B's 512 KiB",
        "overlapping_lines_visible": "In the plot above 405B is dashed and LLaMA-7B is thick, so both overlapping "
                                     "lines stay visible",
        "mistral_plain_formula_double": "At 8192 tokens the plain formula gives Mistral-7B twice its actual cache",
        "cache_over_weights_128k": "At 128K tokens, the cache of a single Llama-3.1-8B sequence is larger than the "
                                   "model's FP16 weights",
        "deepseek_half_128k": "At 128K tokens, DeepSeek-V3's cache is about half of Llama-3.1-8B's (between 0.45 "
                              "and 0.6 times)",
        # GPU memory
        "at_most_marketed_gib": "No card in the table has more memory than its marketed figure read as GiB",
        "a100_80_gib": "The A100 80 GB has exactly 80 GiB",
        "t4_ecc": "The T4 in the table has 15/16 of 16 GiB: ECC is on, and 1/16 goes to check bits",
        "usable_default": "The usable fraction of GPU memory defaults to 0.9, the same as vLLM's "
                          "gpu_memory_utilization",
        # will it fit on a T4
        "t4_torch_total": "PyTorch reports about {torch_total_gib} GiB in total on a Colab T4; Llama-3-8B's FP16 "
                          "weights take {weights}",
        "llama7b_no_sequence": "LLaMA-7B's FP16 weights fit, but the memory left cannot hold even one 2048-token "
                               "sequence",
        "sequence_is_1_gib": "That sequence's cache is exactly the 1 GiB computed above",
        "llama3_fp16_too_big": "Llama-3-8B's FP16 weights do not fit: they are larger than the total PyTorch reports",
        "int8_twenty_odd": "With int8 weights, twenty-odd sequences of 2048 tokens fit",
        "int8_past_context": "With int8 the longest context is past Llama-3-8B's own context, and the readout says "
                             "this is only the formula's capacity",
        "gqa_not_int8": "Llama-3-8B's 8 KV heads cut each sequence's cache to 1/4 of LLaMA-7B's: most of those "
                        "sequences come from GQA, not from int8",
        "panel_default_case": "The panel above starts at the first of these cases",
        # the formula against real memory
        "one_eighth": "With 1/8 of the tokens, the bytes are exactly 1/8 of 1 GiB as well",
        "multiples_of_512": "K and V are each a whole multiple of 512 bytes, so the CUDA allocator's rounding adds "
                            "not a single byte",
        "measured_only_on_gpu": "Only on a GPU (or MPS) is this the allocator's own measurement",
    },
})

say = CELLS.say

# What the lesson's functions show (tables, readouts, lines, the summary, the panels' labels and refusals), in the
# course's language when they are called. Every number is a field; the Chinese is what the chapter has always shown.
TEXTS = Phrasebook("memory_estimate.texts", {
    "zh": {
        # controls (the *_LABEL constants of .common are these Chinese labels)
        "label.model": "模型", "label.seq_len": "序列长度 S", "label.batch": "批次 B",
        "label.seq_slider": "拖动 S（对数刻度）", "label.curves": "曲线上的模型",
        "label.cache_dtype": "缓存数据类型", "label.weight_dtype": "权重数据类型",
        "label.gpu": "GPU", "label.budget": "总显存（MiB）", "label.usable": "显存使用比例",
        "custom_gpu": "自定义",
        "need_models": "需要一组模型，收到的是 {got}",
        # names
        "hypothetical_label": "原文假设的 70B（64 个 KV 头）",
        "hypothetical_in_sentence": "原文假设的 70B（64 个 KV 头）",
        "list_sep": "、", "list_last": "{items} 和 {last}",
        "with_kv_heads": "{model}（{n} 个 KV 头）",
        "hypothetical_note": "这是原文假设的模型，参数量 {params:g}B 也是假设的。形状完全相同、{heads} 个头各存一份 K/V 的"
                             "真实模型有 {twins}；{gqa_models} 用 GQA，只有 {kv_heads} 个 KV 头。",
        "beyond.learned": "{model} 的位置嵌入表只有 {ctx:,} 行：模型根本无法处理这么长的输入，这个数只是按公式算出的字节数",
        "beyond.extrapolated": "模型没有为这么长的输入训练过，这个数只是公式的外推",
        "beyond.line": '<span style="color:#8a4b00">⚠ S = {S:,} 超过了 {model} 发布时的上下文（{ctx:,} 个 token）：'
                       "{why}。</span>",
        # 1. the original's figures
        "fig.per_layer": "LLaMA-7B 每层，S = {S:,}",
        "fig.total": "LLaMA-7B 共 {L} 层，S = {S:,}",
        "fig.long": "LLaMA-7B，S = {S:,}",
        "fig.mha70": "{model}：L = {L}，H = {H}，D = {D}，S = {S:,}",
        "fig.real70": "真实的 {model}（{kv} 个 KV 头），S = {S:,}",
        "says.about": "约{gb}GB", "says.over": "超过{gb}GB",
        "verdict.holds": "成立", "verdict.fails": '<span style="color:#b00">不成立</span>',
        "verdict.more": "{verdict}：{kvlab} {sign} {text}",
        "verdict.ratio": "{verdict}：kvlab 的结果是原文的 {ratio} 倍",
        "what.beyond": '<br><span style="color:#8a4b00;font-size:90%">⚠ 超过 {model} 发布时的上下文'
                       "（{ctx:,} 个 token）：这是原文自己假设的长度</span>",
        "figures.row": "<tr><td>{what}</td><td>{says}</td><td><b>{size}</b>（{n:,} B）</td><td>{verdict}</td></tr>",
        "figures.table": "<table><thead><tr><th>原文说的是</th><th>原文的数字</th><th>kvlab 算出的（精确字节数）</th>"
                         "<th>结论</th></tr></thead><tbody>{rows}</tbody></table>",
        "variant.as_written": "原文代码原样：S = 2048，K 和 V 两份，FP16 每个元素 2 字节",
        "variant.seq_len": "S = {S}（3.2 节示例用的长度）",
        "variant.k_only": "只算 K（或只算 V）：少乘了「K 和 V」的 2",
        "variant.one_byte": "每个元素按 1 字节算（INT8/FP8）：少乘了 FP16 的 2",
        "variant.half_h": "H = {H}（头数减半）",
        "variant.half_d": "D = {D}（头维度减半）",
        "variant.half_l": "L = {L}（层数减半）",
        "variants.table": "<table><thead><tr><th>原文的计算，只改一处</th><th>每层 KV Cache</th><th>总 KV Cache</th></tr>"
                          "</thead><tbody>{rows}</tbody></table>",
        "seventy_b": "若「同样序列长度」指的是 S = {S:,}，64 个 KV 头的 70B 只要 {at_s}，不到原文说的 {threshold} GB；"
                     "按上一句的 S = {long_s:,} 读，是 {at_long}。\n同样长度下，它的缓存是 LLaMA-7B 的 {scale} 倍："
                     "层数之比 {l70}/{l7} 乘 KV 头数之比 {kv70}/{kv7}。用原文自己的「约{text_gb}GB」乘 {scale} 只有约 "
                     "{scaled_gb} GB，并不超过 {threshold} GB；用改正后的 {corrected} 乘 {scale} 得 {corrected_scaled}，"
                     "才超过 {threshold} GB。",
        # 2. the calculator
        "formula.latent": "L × B × S × (压缩向量维度 + RoPE 键维度) × 每元素字节 = {L} × {B:,} × {S:,} × "
                          "({rank} + {rope}) × {byte:g} B = {total}",
        "formula.windowed": "2 × {n_win} 个窗口层 × B × H × min(S, {W:,}) × D",
        "formula.both": "({windowed} + 2 × {n_full} 个全局层 × B × H × S × D)",
        "formula.sliding": "{layers} × 每元素字节（B = {B:,}，H = {H}，S = {S:,}，D = {D}，每元素 {byte:g} B） = {total}",
        "formula.plain": "2 × L × B × H × S × D × 每元素字节 = 2 × {L} × {B:,} × {H} × {S:,} × {D} × {byte:g} B = {total}",
        "attention.mla": "多头潜在注意力（MLA）：{heads} 个查询头，每层每个 token 缓存 {rank} 维的压缩向量"
                         "和 {rope} 维的共用 RoPE 键",
        "attention.mha": "多头注意力（MHA）：{heads} 个查询头，每个头一组 K/V",
        "attention.mqa": "多查询注意力（MQA）：{heads} 个查询头共用 1 组 K/V",
        "attention.gqa": "分组查询注意力（GQA）：{heads} 个查询头分成 {groups} 组，每 {per} 个共用 1 组 K/V",
        "window.every": "每一层", "window.some": "每 {period} 层中的 1 层（共 {n} 层）",
        "window_term.mistral": "（Mistral 论文称之为滚动缓存，rolling buffer cache）",
        "explain.sliding": "{model} 的{which}是滑动窗口层：只看、也只存最近 {W:,} 个 token{term}，所以 S 超过 {W:,} "
                           "后这些层的缓存不再增长。能不能真的省下这部分显存，取决于推理引擎是否实现了滚动缓存"
                           "（较早版本的 vLLM 仍按完整长度给这些层分配缓存）。",
        "explain.latent": "{model} 用多头潜在注意力（MLA）：每层每个 token 只存两样东西：一个 {rank} 维的压缩向量"
                          "（所有头的 K 和 V 都由它还原）和一个所有头共用的 {rope} 维旋转位置编码（RoPE）键，"
                          "共 {dim} 个数，所以缓存与头数无关。",
        "calc.dims": "，头维度 D = {D}",
        "calc.context": "发布时的上下文 {ctx:,} 个 token",
        "calc.no_context": "假设的模型，没有发布时的上下文",
        "calc.head": "<b>{model}</b>：{n} 层，{attention}{dims}；{context}",
        "calc.per_token": "每个 token（1 条序列，所有层）：{size}",
        "calc.per_token_windowed": "每个 token（1 条序列，所有层；窗口填满之前）：{size}",
        "calc.mean": "；S = {S:,} 时平均每个 token：{size}",
        "calc.totals": "{per_token}；每层：{layers}；总计：<b>{total}</b>",
        "calc.layers_two": "窗口层 {windowed}，全局层 {full}",
        "calc.what_mla": "每个头各存 D = {D} 维的 K 和 V，即 DeepSeek-V2 论文对比的 MHA",
        "calc.what_all": "每一层都存下全部 S 个 token",
        "calc.same": "{note}S = {S:,} 还没有超过窗口 {W:,}，按普通公式 2 × L × B × H × S × D 算也得到 {plain}：两者相同。",
        "calc.plain": "{note}若按普通公式 2 × L × B × H × S × D 算（{what}），会得到 {plain}，是实际的 {ratio} 倍。",
        "calc.quantized": '<span style="font-size:90%;color:#555">{dtype} 缓存实际还要为每组数存缩放系数'
                          "（多为 16 位），所以实际字节数比这里算的略多。</span>",
        "calc.hypothetical": "（{note}）",
        "calc.weights": "{model} 的 FP16 权重",
        "calc.weights_assumed": "{model} 的 FP16 权重（假设的参数量）",
        "long.line": "{model}：{S:,} 个 token 的缓存 {cache}，FP16 权重 {weights}",
        "long.released": "（它发布的是 {dtype} 权重：{size}，不含块缩放系数）",
        "cmp.falcon": "Falcon-7B（MQA）每个 token {falcon}，是 LLaMA-7B（{llama}）的 {ratio}：KV 头从 {kv7} 个减到 "
                      "{kvf} 个贡献 {heads}，头维度从 {d7} 减到 {df} 贡献 {dims}（两者层数都是 {L}）。",
        "cmp.405b": "Llama-3.1-405B 每个 token {big}，反而比 LLaMA-7B 的 {llama} 还少：它有 {L} 层，但只有 {kv} 个 KV 头"
                    "（LLaMA-7B 是 {L7} 层、{kv7} 个）。",
        "cmp.mistral": "Mistral-7B 在 {S:,} 个 token 时的缓存是 {actual}；普通公式会算成 {plain}，是实际的 {ratio} 倍"
                       "（这是按本节的公式算出的结果；能不能真的省下，取决于推理引擎是否实现了滚动缓存）。",
        "cmp.l31": "{S:,} 个 token 时，Llama-3.1-8B 一条序列的缓存（{cache}）已经比它自己的 FP16 权重（{weights}）还大。",
        "cmp.v3": "{v3_b:.0f}B 的 DeepSeek-V3 的缓存（{v3}）只有 {l31_b:.0f}B 的 Llama-3.1-8B（{l31}）的一半左右。",
        # 3. will it fit
        "gpu.custom": "自定义 {mib:,} MiB",
        "remedy.card": "换一张显存更大的卡", "remedy.dtype": "把权重换成 {dtypes}", "remedy.or": " 或 ",
        "remedy.split": "把模型切分到多张卡上", "remedy.sep": "、",
        "no_fit": "按显存使用比例 {usable:g}，只有 {budget} 可用，连{model}的 {dtype} 权重（{weights}）都放不下，"
                  "还差 {short}：{remedies}，或者{last}",
        "usable.rest": "其余 {rest:.0%} ", "usable.rest_any": "其余部分",
        "usable.note": "{rest}不做规划，留作余量，给显存碎片和同一张卡上的其他进程；vLLM 还会从规划的这一部分里扣掉 CUDA "
                       "上下文和启动时实测的激活峰值，这里忽略它们，所以算出的缓存空间是上限",
        "approx.weights": "权重按参数个数 × 每个参数的位数估算。",
        "approx.quantized": "{dtype} 权重实际还要存缩放系数，多数方案还把嵌入层和输出层（lm_head）留在 16 位，"
                            "所以实际大小比这里算的略大：这是一个偏小的估计。",
        "approx.usable": "显存使用比例借用 vLLM 的 gpu_memory_utilization：只按总显存的这一部分规划权重和缓存，{note}。",
        "fit.assumed": "（假设的参数量）",
        "fit.head": "权重：{params:,} 个参数{assumed} × {byte:g} B（{wd}）= <b>{weights}</b>；KV Cache（B = {B:,}，"
                    "S = {S:,}，{cd}）：<b>{cache}</b>；可用 {budget}（总显存 {total} × {usable:g}），{rest}",
        "fit.free": "剩余 <b>{free}</b>。",
        "fit.short": '<span style="color:#b00">放不下，还差 <b>{short}</b></span>。',
        "fit.unbounded": "不受显存限制（滑动窗口让缓存封顶）",
        "fit.none": "0 个 token（连 1 个 token 都放不下）",
        "fit.tokens": "<b>{n:,}</b> 个 token{note}",
        "fit.longest": "批次 B = {B:,} 时，放得下的最长上下文：{longest}",
        "fit.largest": "上下文 S = {S:,} 时，放得下的最大批次：<b>{n:,}</b> 条序列",
        "gpu.about": "约 {gib} GiB",
        "gpu.table": "<table><thead><tr><th>GPU</th><th>规格表上写的</th><th>nvidia-smi 报告的总量</th>"
                     "<th>= GiB（2³⁰ 字节）</th><th>= GB（10⁹ 字节）</th><th>PyTorch 报告的总量</th></tr></thead>"
                     "<tbody>{rows}</tbody></table>",
        "plan.head": "{model}，{dtype} 权重 {weights}，可用 {budget}",
        "plan.no_weights": "{head}：权重本身就放不下，还差 {short}",
        "plan.tokens": "{n:,} 个 token{note}",
        "plan.line": "{head}：留给缓存 {room}，最长上下文 {longest}，{S:,} 个 token 时最大批次 {batch}",
        "past_context": "（超过模型的上下文 {ctx:,}：显存不是瓶颈，这只是按公式算出的容量）",
        "int8_gain": "为什么 int8 的{model}放得下这么多条：int8 把权重减半（{fp16} → {int8}）；它又用 GQA"
                     "（{kv} 个 KV 头），一条 {S:,} 个 token 的序列的缓存只要 {cache}，是 {other}（{other_kv} 个 KV 头，"
                     "{other_cache}）的 1/{ratio}",
        # 4. GQA
        "twin.past": "（超过 {model} 的上下文 {ctx:,}）",
        "twin.line": "{mha}：{mha_size}；{gqa}：{gqa_size}；前者是后者的 {ratio} 倍{past}",
        # 5. the formula against real memory
        "method.cpu": "CPU 上没有分配器的计数：读的是 K、V 两个张量存储的字节数 untyped_storage().nbytes()，"
                      "这只核对了张量的形状和数据类型，并不是分配器的实测",
        "method.counter": "{device} 分配器自己的计数：分配前后 {counter} 之差",
        "alloc.measured": "实测", "alloc.storage": "张量存储",
        "alloc.device": "设备 {device}：K、V 各一个形状为 {shape} 的 {dtype} 张量",
        "alloc.method": "方法：{method}",
        "alloc.bytes": "公式 {formula:,} B，{what} {measured:,} B（{size}）",
        "alloc.rounding": "CUDA 分配器把每个张量向上取整到 {block} 字节的倍数后记账：K、V 取整后共 {n:,} B",
        "device.none": "当前设备是 {device}，不是 CUDA GPU：没有 torch 报告的显存可看。",
        "device.line": "{name}：torch 报告总显存 {total:,} B = {size}，此刻空闲 {free}",
        "device.unknown": "（表里没有这张卡）。",
        "device.table": "；表里 nvidia-smi 的总量是 {mib:,} MiB。",
        # summary
        "summary.measured": "这一次在 GPU 上用分配器的计数实测了一块缩小版的缓存，结果见上一节按实测数字写出的说明",
        "summary.storage": "这一次在 CPU 上只核对了张量的形状和数据类型，并不是分配器的实测；在 GPU 上运行时才是实测",
        "summary.code": "原文 3.4 节的代码是对的：LLaMA-7B 在 {S:,} 个 token、FP16 时每层 {layer}，共 {total}；"
                        "{long_s:,} 个 token 时 {long_total}。注释里的 {comment_layer}、{comment_total} 与这段代码在 "
                        "S = {short_s:,} 时的输出相同，这是最可能的来历（漏乘任意一个 2 也会得到它们）；正文的"
                        "「约{text_gb}GB」又是在 {comment_total} 上乘 {factor} 得来的。所以三个数都恰好少了一半。",
        "summary.units": "GB（10⁹ 字节）与 GiB（2³⁰ 字节）只差约 {pct:.0f}%，kvlab 一律用 GiB 并写出单位。",
        "summary.gqa": "公式里的 H 是 KV 头数：{gqa} 的缓存只有{mha}的 1/{ratio}；滑动窗口和 MLA 的模型要用各自的公式。",
        "summary.paging": "分页（PagedAttention）不减少这些字节数，它消除的是预先预留造成的浪费和显存碎片；字节数本身要靠 "
                          "GQA/MQA、MLA、滑动窗口和量化缓存来减少。",
        "summary.deploy": "部署时权重和缓存共享一张卡，而且只能按总显存的一部分来规划：批次和上下文此消彼长，"
                          "计算器能算出两者各自的上限。",
        "summary.run": "{run}。",
    },
    "en": {
        "label.model": "Model", "label.seq_len": "Sequence length S", "label.batch": "Batch B",
        "label.seq_slider": "Drag S (log scale)", "label.curves": "Models on the curves",
        "label.cache_dtype": "Cache dtype", "label.weight_dtype": "Weight dtype",
        "label.gpu": "GPU", "label.budget": "GPU memory (MiB)", "label.usable": "Usable fraction",
        "custom_gpu": "Custom",
        "need_models": "needs a list of models, got {got}",
        "hypothetical_label": "Hypothetical 70B (64 KV heads)",
        "hypothetical_in_sentence": "the hypothetical 70B (64 KV heads)",
        "list_sep": ", ", "list_last": "{items} and {last}",
        "with_kv_heads": "{model} ({n} KV heads)",
        "hypothetical_note": "This is the original chapter's hypothetical model; its {params:g}B parameters are assumed "
                             "too. The real models of exactly this shape, with each of the {heads} heads storing "
                             "its own K/V, are {twins}; {gqa_models} use GQA, with only {kv_heads} KV heads.",
        "beyond.learned": "{model}'s position-embedding table has only {ctx:,} rows: the model cannot take an input "
                          "this long at all, and the number is only the bytes the formula gives",
        "beyond.extrapolated": "the model was never trained on inputs this long, and the number only extrapolates "
                               "the formula",
        "beyond.line": '<span style="color:#8a4b00">⚠ S = {S:,} is past {model}\'s context at release ({ctx:,} '
                       "tokens): {why}.</span>",
        "fig.per_layer": "LLaMA-7B, per layer, S = {S:,}",
        "fig.total": "LLaMA-7B, all {L} layers, S = {S:,}",
        "fig.long": "LLaMA-7B, S = {S:,}",
        "fig.mha70": "{model}: L = {L}, H = {H}, D = {D}, S = {S:,}",
        "fig.real70": "The real {model} ({kv} KV heads), S = {S:,}",
        "says.about": "about {gb}GB", "says.over": "over {gb}GB",
        "verdict.holds": "Holds", "verdict.fails": '<span style="color:#b00">Does not hold</span>',
        "verdict.more": "{verdict}: {kvlab} {sign} {text}",
        "verdict.ratio": "{verdict}: kvlab's result is {ratio} times the original's",
        "what.beyond": '<br><span style="color:#8a4b00;font-size:90%">⚠ Past {model}\'s context at release '
                       "({ctx:,} tokens): the length is the original's own choice</span>",
        "figures.row": "<tr><td>{what}</td><td>{says}</td><td><b>{size}</b> ({n:,} B)</td><td>{verdict}</td></tr>",
        "figures.table": "<table><thead><tr><th>What the original is about</th><th>The original's figure</th>"
                         "<th>kvlab's result (exact bytes)</th><th>Verdict</th></tr></thead><tbody>{rows}</tbody>"
                         "</table>",
        "variant.as_written": "The original code as written: S = 2048, both K and V, 2 bytes per FP16 element",
        "variant.seq_len": "S = {S} (the length of the example in section 3.2)",
        "variant.k_only": "K only (or V only): the factor 2 for \"K and V\" left out",
        "variant.one_byte": "1 byte per element (INT8/FP8): FP16's factor 2 left out",
        "variant.half_h": "H = {H} (half the heads)",
        "variant.half_d": "D = {D} (half the head dimension)",
        "variant.half_l": "L = {L} (half the layers)",
        "variants.table": "<table><thead><tr><th>The original's calculation with one change</th>"
                          "<th>KV cache per layer</th><th>Total KV cache</th></tr></thead><tbody>{rows}</tbody>"
                          "</table>",
        "seventy_b": "If \"the same sequence length\" means S = {S:,}, the 70B with 64 KV heads needs only {at_s}, "
                     "less than the {threshold} GB the original names; read at the S = {long_s:,} of the sentence "
                     "before it, it needs {at_long}.\nAt the same length its cache is {scale} times LLaMA-7B's: the "
                     "ratio of layers, {l70}/{l7}, times the ratio of KV heads, {kv70}/{kv7}. The original's own "
                     "\"about {text_gb}GB\" times {scale} is only about {scaled_gb} GB, not over {threshold} GB; the "
                     "corrected {corrected} times {scale} gives {corrected_scaled}, and only that exceeds "
                     "{threshold} GB.",
        "formula.latent": "L × B × S × (compressed vector dim + RoPE key dim) × bytes per element = {L} × {B:,} × "
                          "{S:,} × ({rank} + {rope}) × {byte:g} B = {total}",
        "formula.windowed": "2 × {n_win} window layers × B × H × min(S, {W:,}) × D",
        "formula.both": "({windowed} + 2 × {n_full} global layers × B × H × S × D)",
        "formula.sliding": "{layers} × bytes per element (B = {B:,}, H = {H}, S = {S:,}, D = {D}, {byte:g} B per "
                           "element) = {total}",
        "formula.plain": "2 × L × B × H × S × D × bytes per element = 2 × {L} × {B:,} × {H} × {S:,} × {D} × "
                         "{byte:g} B = {total}",
        "attention.mla": "multi-head latent attention (MLA): {heads} query heads; per layer, each token caches a "
                         "{rank}-dim compressed vector and a {rope}-dim shared RoPE key",
        "attention.mha": "multi-head attention (MHA): {heads} query heads, one K/V pair per head",
        "attention.mqa": "multi-query attention (MQA): {heads} query heads share 1 K/V pair",
        "attention.gqa": "grouped-query attention (GQA): {heads} query heads in {groups} groups of {per}, each group "
                         "sharing 1 K/V pair",
        "window.every": "every layer", "window.some": "1 layer in every {period} ({n} layers in all)",
        "window_term.mistral": " (the Mistral paper calls it a rolling buffer cache)",
        "explain.sliding": "In {model}, {which} is a sliding-window layer: it attends to, and stores, only the last "
                           "{W:,} tokens{term}, so once S passes {W:,} these layers' cache stops growing. Whether "
                           "that memory is really saved depends on whether the inference engine implements a "
                           "rolling cache (earlier versions of vLLM still allocate these layers' cache for the full "
                           "length).",
        "explain.latent": "{model} uses multi-head latent attention (MLA): per layer, each token stores only two "
                          "things, a {rank}-dim compressed vector (every head's K and V are rebuilt from it) and a "
                          "{rope}-dim rotary position embedding (RoPE) key shared by all heads, {dim} numbers in all, "
                          "so the cache does not depend on the number of heads.",
        "calc.dims": ", head dimension D = {D}",
        "calc.context": "released context {ctx:,} tokens",
        "calc.no_context": "a hypothetical model, with no released context",
        "calc.head": "<b>{model}</b>: {n} layers, {attention}{dims}; {context}",
        "calc.per_token": "Per token (1 sequence, all layers): {size}",
        "calc.per_token_windowed": "Per token (1 sequence, all layers; before the window fills): {size}",
        "calc.mean": "; mean per token at S = {S:,}: {size}",
        "calc.totals": "{per_token}; per layer: {layers}; total: <b>{total}</b>",
        "calc.layers_two": "window layers {windowed}, global layers {full}",
        "calc.what_mla": "every head storing its own D = {D}-dim K and V, the MHA the DeepSeek-V2 paper compares "
                         "against",
        "calc.what_all": "every layer storing all S tokens",
        "calc.same": "{note} S = {S:,} is not yet past the window of {W:,}, so the plain formula "
                     "2 × L × B × H × S × D gives {plain} as well: the two agree.",
        "calc.plain": "{note} The plain formula 2 × L × B × H × S × D ({what}) would give {plain}, {ratio} times the "
                      "actual figure.",
        "calc.quantized": '<span style="font-size:90%;color:#555">An {dtype} cache also stores a scale for each '
                          "group of numbers (mostly 16-bit), so the real byte count is a little higher than the one "
                          "computed here.</span>",
        "calc.hypothetical": "({note})",
        "calc.weights": "FP16 weights of {model}",
        "calc.weights_assumed": "FP16 weights of {model} (assumed parameter count)",
        "long.line": "{model}: cache for {S:,} tokens {cache}, FP16 weights {weights}",
        "long.released": " (its weights are released in {dtype}: {size}, block scales not counted)",
        "cmp.falcon": "Falcon-7B (MQA) needs {falcon} per token, {ratio} of LLaMA-7B's ({llama}): going from {kv7} "
                      "KV heads to {kvf} gives {heads}, the head dimension going from {d7} to {df} gives {dims} "
                      "(both have {L} layers).",
        "cmp.405b": "Llama-3.1-405B needs {big} per token, even less than LLaMA-7B's {llama}: it has {L} layers but "
                    "only {kv} KV heads (LLaMA-7B: {L7} layers, {kv7} KV heads).",
        "cmp.mistral": "At {S:,} tokens Mistral-7B's cache is {actual}; the plain formula would give {plain}, {ratio} "
                       "times the actual figure (this is what this section's formula computes; whether it is really "
                       "saved depends on whether the inference engine implements a rolling cache).",
        "cmp.l31": "At {S:,} tokens, the cache of a single Llama-3.1-8B sequence ({cache}) is already larger than the "
                   "model's own FP16 weights ({weights}).",
        "cmp.v3": "The {v3_b:.0f}B DeepSeek-V3's cache ({v3}) is only about half that of the {l31_b:.0f}B "
                  "Llama-3.1-8B ({l31}).",
        "gpu.custom": "Custom {mib:,} MiB",
        "remedy.card": "use a card with more memory", "remedy.dtype": "switch the weights to {dtypes}",
        "remedy.or": " or ",
        "remedy.split": "split the model across several cards", "remedy.sep": ", ",
        "no_fit": "At a usable fraction of {usable:g}, only {budget} is usable: not even the {dtype} weights of {model} "
                  "({weights}) fit, {short} short: {remedies}, or {last}",
        "usable.rest": "The remaining {rest:.0%} ", "usable.rest_any": "The rest ",
        "usable.note": "{rest}is left out of the plan: it is a margin for fragmentation and for other processes on the "
                       "same card; vLLM also takes the CUDA context and the activation peak it measures at startup "
                       "out of the planned part, which this ignores, so the room computed for the cache is an upper "
                       "bound",
        "approx.weights": "Weights are estimated as parameter count × bits per parameter.",
        "approx.quantized": " {dtype} weights also store scales, and most schemes keep the embedding and output "
                            "layer (lm_head) in 16 bits, so the real size is a little larger than computed here: this "
                            "is an underestimate.",
        "approx.usable": " The usable fraction borrows vLLM's gpu_memory_utilization: weights and cache are planned "
                         "on this share of the total memory only. {note}.",
        "fit.assumed": " (assumed parameter count)",
        "fit.head": "Weights: {params:,} parameters{assumed} × {byte:g} B ({wd}) = <b>{weights}</b>; KV cache "
                    "(B = {B:,}, S = {S:,}, {cd}): <b>{cache}</b>; usable {budget} (total {total} × {usable:g}), "
                    "{rest}",
        "fit.free": "<b>{free}</b> left.",
        "fit.short": '<span style="color:#b00">does not fit, <b>{short}</b> short</span>.',
        "fit.unbounded": "not limited by memory (the sliding window caps the cache)",
        "fit.none": "0 tokens (not even 1 token fits)",
        "fit.tokens": "<b>{n:,}</b> tokens{note}",
        "fit.longest": "Longest context that fits at batch B = {B:,}: {longest}",
        "fit.largest": "Largest batch that fits at context S = {S:,}: <b>{n:,}</b> sequences",
        "gpu.about": "about {gib} GiB",
        "gpu.table": "<table><thead><tr><th>GPU</th><th>On the datasheet</th><th>Total nvidia-smi reports</th>"
                     "<th>= GiB (2³⁰ bytes)</th><th>= GB (10⁹ bytes)</th><th>Total PyTorch reports</th></tr></thead>"
                     "<tbody>{rows}</tbody></table>",
        "plan.head": "{model}, {dtype} weights {weights}, usable {budget}",
        "plan.no_weights": "{head}: the weights alone do not fit, {short} short",
        "plan.tokens": "{n:,} tokens{note}",
        "plan.line": "{head}: {room} left for the cache; longest context {longest}; largest batch at {S:,} tokens: "
                     "{batch}",
        "past_context": " (past the model's context of {ctx:,}: memory is not the limit, this is only the "
                        "formula's capacity)",
        "int8_gain": "Why int8 {model} holds so many sequences: int8 halves the weights ({fp16} → {int8}); and with "
                     "GQA ({kv} KV heads) a sequence of {S:,} tokens needs only {cache} of cache, 1/{ratio} of "
                     "{other}'s ({other_kv} KV heads, {other_cache})",
        "twin.past": " (past {model}'s context of {ctx:,})",
        "twin.line": "{mha}: {mha_size}; {gqa}: {gqa_size}; the first is {ratio} times the second{past}",
        "method.cpu": "the CPU has no allocator count: this reads the bytes of the two tensors' storage, K's and "
                      "V's untyped_storage().nbytes(), which checks only their shape and dtype and is not a "
                      "measurement by the allocator",
        "method.counter": "the {device} allocator's own count: {counter} after the allocation minus before",
        "alloc.measured": "measured", "alloc.storage": "tensor storage",
        "alloc.device": "Device {device}: K and V, each a tensor of shape {shape} in {dtype}",
        "alloc.method": "Method: {method}",
        "alloc.bytes": "Formula {formula:,} B, {what} {measured:,} B ({size})",
        "alloc.rounding": "The CUDA allocator books each tensor rounded up to a multiple of {block} bytes: K and V "
                          "come to {n:,} B after rounding",
        "device.none": "This device is {device}, not a CUDA GPU: there is no GPU memory for torch to report.",
        "device.line": "{name}: torch reports {total:,} B = {size} in total, {free} free right now",
        "device.unknown": " (this card is not in the table).",
        "device.table": "; the table's nvidia-smi total is {mib:,} MiB.",
        "summary.measured": "This run measured a scaled-down cache on a GPU with the allocator's count; the result "
                            "is in the sentence written from the measured numbers in the previous section",
        "summary.storage": "This run, on a CPU, only checked the tensors' shape and dtype, which is not a "
                           "measurement by the allocator; running on a GPU measures it",
        "summary.code": "The code in the original's section 3.4 is right: for LLaMA-7B at {S:,} tokens in FP16 it "
                        "is {layer} per layer and {total} in all, and {long_total} at {long_s:,} tokens. The "
                        "comment's {comment_layer} and {comment_total} are what the same code prints at "
                        "S = {short_s:,}, the most likely origin (leaving out any one factor of 2 gives them too); "
                        "and the text's \"about {text_gb}GB\" is {comment_total} times {factor}. So all three "
                        "numbers are exactly half the right ones.",
        "summary.units": "GB (10⁹ bytes) and GiB (2³⁰ bytes) differ by only about {pct:.0f}%; kvlab always uses "
                         "GiB and writes the unit.",
        "summary.gqa": "The H in the formula is the number of KV heads: the cache of {gqa} is only 1/{ratio} of that of {mha}; "
                       "models with sliding windows or MLA need their own formulas.",
        "summary.paging": "Paging (PagedAttention) does not reduce these bytes; it removes the waste of reserving "
                          "ahead and the fragmentation of GPU memory. The bytes themselves come down only with "
                          "GQA/MQA, MLA, sliding windows and quantized caches.",
        "summary.deploy": "In deployment, weights and cache share one card, and only part of its memory can be "
                          "planned with: batch and context trade off against each other, and the calculator works "
                          "out the limit of each.",
        "summary.run": "{run}.",
    },
})
