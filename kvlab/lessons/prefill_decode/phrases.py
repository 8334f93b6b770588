"""What chapter 3.3's code cells print, in both languages (issue 34: code cells hold code only).

:data:`CELLS` holds the cells' readouts and the descriptions of their ``confirm`` checks; :data:`PROMPTS` the text the
cells feed the demo model. The English prompts were chosen on the English demo model (``load_demo_model(lang="en")``):
the timeline's prompt continues with the corpus's own sentence about the two phases, and the short prompt is 4 tokens,
like 「人工智能」, with FP16's largest logit error well under half the smallest top-1 gap over 200 greedy tokens and INT8's
above it, which the precision cell's checks need."""
from __future__ import annotations

from ...phrases import Phrasebook
from .timeline import DEFAULT_PROMPT

CELLS = Phrasebook("prefill_decode.cells", {
    "zh": {
        # the setup cell
        "device": "运行设备：{device}",
        # one real generation as a timeline
        "timeline_prompt": "提示词「{prompt}」共 {tokens} 个 token；生成：「{text}」",
        "timeline_prefill": "第 1 次前向：phase = {phase!r}，送进 {tokens} 个 token，{ms:.2f} ms",
        "timeline_decode": "其后 {passes} 次前向：phase = {phase!r}，每次送进 {tokens} 个 token",
        "timeline_cache": "cache.length：{first} → {second} → … → {last}；每个 token 的 K/V（所有层）{per_token}，"
                          "预分配 {allocated}",
        "ttft": "TTFT = {ms:.2f} ms（{runs} 遍中最快的预填充）",
        "check_prefill_first": "第 1 次前向是预填充，送进整段提示词",
        "check_decode_after": "之后每次前向都是解码，只送进 1 个 token",
        "check_length_grows": "cache.length 从提示词长度开始，每次前向之后加 1",
        "check_bytes_used": "已用字节 = cache.length × 每个 token 的 K/V 字节",
        "check_allocated_once": "缓存只分配了一次，大小始终不变",
        "check_ttft_fastest": "TTFT 是 {runs} 遍里最快的预填充，也就是图上画的那一遍",
        # the four steps on a real cache
        "steps_lengths": "每次前向之后的 cache.length：{lengths}",
        "steps_written": "每次前向写入的 token 行（任意层、任意头）：{rows}",
        "steps_rows_per_head": "每次前向里每层、每个 KV 头新增的行数：{counts}",
        "steps_untouched": "之前存下的行逐位不变：{old}；length 之后的行仍是全 0：{rest}",
        "steps_logits": "用缓存解码的 logits 与不用缓存重算的最大差：{diff:.1e}",
        "check_prefill_length": "预填充 P 个 token 之后，length = P",
        "check_prefill_rows": "预填充写入第 0 到 P − 1 行，每层、每个 KV 头都是 P 行",
        "check_decode_length": "每步解码之后 length 加 1",
        "check_decode_row": "每步解码只写 1 行，紧接在已存的行后面",
        "check_every_head": "每一层、每个 KV 头都恰好多出这 1 行",
        "check_old_rows": "之前存下的行每次前向之后都逐位不变",
        "check_rest_zero": "从 length 起的行仍是分配时的 0",
        "check_logits_match": "用缓存算出的 logits 与整段重算只差浮点舍入（< 10⁻³）",
        # the roofline model and its costs
        "big_model": "{layers} 层，d_model = {d_model}，{heads} 个头 × {head_dim} 维，d_ff = {d_ff}，词表 {vocab}："
                     "{params:,} 个参数",
        "check_decode_intensity": "一步解码的算术强度不到 1 FLOP/字节",
        "check_prefill_intensity": "预填充 256 个 token 的算术强度超过 100 FLOP/字节",
        "flops_prefill": "预填充 32 个 token：公式 {formula:,} FLOP，torch 计数 {counted:,} FLOP",
        "flops_decode": "其后一步解码：      公式 {formula:,} FLOP，torch 计数 {counted:,} FLOP",
        "check_flops_counted": "公式与 torch 数出的运算次数完全相同（预填充和解码）",
        # prefill against decode
        "sweep_row": "P = {P:>3}：预填充 {prefill_ms:7.2f} ms（{prefill_rate:8,.0f} token/s），"
                     "一步解码 {decode_ms:6.2f} ms（{decode_rate:5,.0f} token/s），逐个送入要 {speedup:5.1f} 倍的时间",
        "sweep_how": "（{device}；每个长度生成 {repeats} 次，每次计时预填充和其后的 {steps} 步解码，两者都取最快的一次）",
        "check_prefill_half_p": "P ≥ 8 时预填充的算术强度与 P / 2 相差不到 15%",
        # batched decode
        "batch_row": "B = {B:>2}：一步 {ms:6.2f} ms，{rate:6,.0f} token/s，I = {intensity:5.2f} FLOP/字节，"
                     "{gflops:5.1f} GFLOP/s",
        "batch_how": "（{device}；每条序列的缓存里已有 {context} 个 token；每个 B 测 {repeats} 次、每次 {steps} 步，"
                     "各个 B 交替进行，取最快的一次）",
        "batch_weights": "一步要读的权重：B = 1 时 {one}，B = {B} 时 {many}（只多了 {extra} 行嵌入）",
        "check_weights_once": "整批每步只读一遍权重：B 条序列只比 1 条多读 B − 1 行嵌入",
        "check_batch_like_prefill": "B = 32 的解码与 P = 32 的预填充算术强度相差不到 10%（都是 32 行）",
        "check_short_cache_half_b": "缓存很短（8 个 token）时，I 与 B / 2 相差不到 10%",
        "check_kv_share_grows": "上下文越长，K/V 在一步读写的字节里占得越多",
        "check_intensity_falls": "上下文越长，算术强度越低",
        "check_small_matmuls_timed": "分别量了 1、2、4、8 行，每种都有耗时",
        # engineering: preallocation, unequal lengths, FP16/INT8
        "allocations": "预分配：整次生成共 {preallocated} 次分配（K、V 各一次）；"
                       "逐步拼接：{concatenated} 次（每次前向、每层、K 和 V 各一次）",
        "check_preallocated_twice": "预分配：整次生成只分配 2 次（K、V 各一次）",
        "check_concat_every_pass": "逐步拼接：每次前向、每层、K 和 V 各分配一次",
        "check_same_text": "两种缓存生成的文字完全相同",
        "check_preallocated_size": "预分配的大小正好是「提示词 + 生成数 − 1」个 token",
        "padded_lengths": "长度 {lengths}，padding {pads}：{same} / {n} 条与单独运行相同",
        "padded_slots": "槽位：分配 {allocated}，实际 {used}，分页 {paged}；{extra:.1%} 的计算花在 padding 上",
        "check_same_as_alone": "每条序列生成的 token 与它单独运行时相同",
        "check_left_padded": "左侧补齐到最长的那条",
        "check_padded_slots": "分配的槽位 = 条数 ×（最长提示词 + 生成数 − 1），从真实的缓存读出",
        "check_slots_order": "实际用到的 < 分页占用的 < 补齐分配的，且 padding 确实多花了计算",
        "precision_row": "{label}：{nbytes:,} 字节 = {size}（每元素 {element:g} 字节），最大 logit 误差 {error:.2e}，"
                         "top-1 一致 {agree:.1%}，自由生成 {matching} / {new} 个 token 与 FP32 缓存相同",
        "precision_spread": "FP32 logits 的跨度（中位数）{spread:.1f}；最大与第二大 logit 之差，最小 {margin:.3f}",
        "check_fp32_bytes": "FP32 缓存的字节 = 2 × 层数 × KV 头数 × 槽位 × D × 4（实测 = 公式）",
        "check_fp16_half": "FP16 缓存恰好是 FP32 的一半",
        "check_int8_bytes": "INT8 再减半，外加每个向量一个 4 字节的缩放系数",
        "check_error_order": "误差：0 < FP16 的 5 倍 < INT8 < logits 跨度的 1%",
        "check_fp16_greedy": "FP16 的误差小到不可能改变贪心选择，{new} 个 token 全部相同",
        "check_int8_not_greedy_safe": "INT8 的最大误差超过了最小差距的一半",
        # the page's end
        "timings_from": "本页的计时来自：{device}；roofline：{roofline}",
    },
    "en": {
        "device": "Running on: {device}",
        "timeline_prompt": "The prompt \"{prompt}\" is {tokens} tokens long; generated: \"{text}\"",
        "timeline_prefill": "Forward pass 1: phase = {phase!r}, {tokens} tokens in, {ms:.2f} ms",
        "timeline_decode": "The {passes} passes after it: phase = {phase!r}, {tokens} token in each",
        "timeline_cache": "cache.length: {first} → {second} → … → {last}; K/V per token (all layers) {per_token}, "
                          "preallocated {allocated}",
        "ttft": "TTFT = {ms:.2f} ms (the fastest prefill of {runs} runs)",
        "check_prefill_first": "Pass 1 is the prefill, and it takes in the whole prompt",
        "check_decode_after": "Every pass after it is a decode step that takes in a single token",
        "check_length_grows": "cache.length starts at the prompt's length and grows by 1 after each pass",
        "check_bytes_used": "Bytes used = cache.length × K/V bytes per token",
        "check_allocated_once": "The cache was allocated once and never changed size",
        "check_ttft_fastest": "TTFT is the fastest of the {runs} prefills, the run the figure draws",
        "steps_lengths": "cache.length after each pass: {lengths}",
        "steps_written": "Token rows each pass wrote (any layer, any head): {rows}",
        "steps_rows_per_head": "Rows each pass added in every layer and KV head: {counts}",
        "steps_untouched": "Rows stored earlier unchanged bit for bit: {old}; rows from length on still all 0: {rest}",
        "steps_logits": "Largest difference between the cached decode's logits and a recompute without a cache: "
                        "{diff:.1e}",
        "check_prefill_length": "After prefilling P tokens, length = P",
        "check_prefill_rows": "Prefill writes rows 0 to P − 1: P rows in every layer and KV head",
        "check_decode_length": "Each decode step adds 1 to length",
        "check_decode_row": "Each decode step writes exactly 1 row, right after the rows already stored",
        "check_every_head": "Every layer and every KV head gains exactly that 1 row",
        "check_old_rows": "Rows stored earlier stay unchanged, bit for bit, after every pass",
        "check_rest_zero": "Rows from length on are still the zeros they were allocated as",
        "check_logits_match": "The cached logits differ from a full recompute only by floating-point rounding (< 10⁻³)",
        "big_model": "{layers} layers, d_model = {d_model}, {heads} heads × {head_dim} dims, d_ff = {d_ff}, "
                     "vocabulary {vocab}: {params:,} parameters",
        "check_decode_intensity": "One decode step's arithmetic intensity is under 1 FLOP/byte",
        "check_prefill_intensity": "Prefilling 256 tokens has an arithmetic intensity above 100 FLOP/byte",
        "flops_prefill": "Prefill of 32 tokens:  formula {formula:,} FLOP, torch counts {counted:,} FLOP",
        "flops_decode": "One decode step after: formula {formula:,} FLOP, torch counts {counted:,} FLOP",
        "check_flops_counted": "The formula and torch's count agree exactly (prefill and decode)",
        "sweep_row": "P = {P:>3}: prefill {prefill_ms:7.2f} ms ({prefill_rate:8,.0f} token/s), "
                     "one decode step {decode_ms:6.2f} ms ({decode_rate:5,.0f} token/s), "
                     "token by token takes {speedup:5.1f}× as long",
        "sweep_how": "({device}; {repeats} generations per length, each timing its prefill and the next {steps} "
                     "decode step(s); the fastest of each counts)",
        "check_prefill_half_p": "For P ≥ 8, prefill's arithmetic intensity is within 15% of P / 2",
        "batch_row": "B = {B:>2}: one step {ms:6.2f} ms, {rate:6,.0f} token/s, I = {intensity:5.2f} FLOP/byte, "
                     "{gflops:5.1f} GFLOP/s",
        "batch_how": "({device}; each sequence's cache already holds {context} tokens; each B timed {repeats} times, "
                     "{steps} steps each, the B's taking turns; the fastest run counts)",
        "batch_weights": "Weights read per step: {one} at B = 1, {many} at B = {B} (just {extra} more embedding rows)",
        "check_weights_once": "A batch reads the weights once per step: B sequences read only B − 1 more embedding "
                              "rows than 1",
        "check_batch_like_prefill": "Decode at B = 32 and prefill at P = 32 are within 10% in arithmetic intensity "
                                    "(32 rows each)",
        "check_short_cache_half_b": "With a very short cache (8 tokens), I is within 10% of B / 2",
        "check_kv_share_grows": "The longer the context, the larger K/V's share of the bytes a step reads and writes",
        "check_intensity_falls": "The longer the context, the lower the arithmetic intensity",
        "check_small_matmuls_timed": "1, 2, 4 and 8 rows were each timed, and each took some time",
        "allocations": "Preallocation: {preallocated} allocations for the whole generation (one for K, one for V); "
                       "concatenation: {concatenated} (one for K and one for V per pass and layer)",
        "check_preallocated_twice": "Preallocation: the whole generation allocates just twice (once for K, once for V)",
        "check_concat_every_pass": "Concatenation: K and V are each allocated once per pass and layer",
        "check_same_text": "Both caches generate exactly the same text",
        "check_preallocated_size": "The preallocated size is exactly prompt + generated − 1 tokens",
        "padded_lengths": "Lengths {lengths}, padding {pads}: {same} / {n} sequences match their run alone",
        "padded_slots": "Slots: {allocated} allocated, {used} used, {paged} paged; {extra:.1%} of the compute goes "
                        "to padding",
        "check_same_as_alone": "Every sequence generates the same tokens as it does when run alone",
        "check_left_padded": "Left-padded to the longest one",
        "check_padded_slots": "Allocated slots = sequences × (longest prompt + generated − 1), read from the real cache",
        "check_slots_order": "Used < paged < padded allocation, and padding really did cost extra compute",
        "precision_row": "{label}: {nbytes:,} bytes = {size} ({element:g} bytes per element), largest logit error "
                         "{error:.2e}, top-1 agreement {agree:.1%}, {matching} / {new} tokens of a free run the same "
                         "as with the FP32 cache",
        "precision_spread": "FP32 logit spread (median) {spread:.1f}; smallest gap between the largest and "
                            "second-largest logit {margin:.3f}",
        "check_fp32_bytes": "FP32 cache bytes = 2 × layers × KV heads × slots × D × 4 (measured = formula)",
        "check_fp16_half": "The FP16 cache is exactly half the size of the FP32 one",
        "check_int8_bytes": "INT8 halves it again, plus one 4-byte scale per vector",
        "check_error_order": "Error: 0 < 5 × FP16's < INT8's < 1% of the logit spread",
        "check_fp16_greedy": "FP16's error is too small to change any greedy choice: all {new} tokens match",
        "check_int8_not_greedy_safe": "INT8's largest error exceeds half the smallest gap",
        "timings_from": "This page's timings come from: {device}; roofline: {roofline}",
    },
})

PROMPTS = Phrasebook("prefill_decode.prompts", {
    "zh": {
        "timeline": DEFAULT_PROMPT,  # the timeline's prompt, also its panel's first
        "short": "人工智能",  # the four steps' prompt and the precision cell's
    },
    "en": {
        "timeline": "An artificial intelligence model usually handles a request in two phases",
        "short": "A large language model",
    },
})

say = CELLS.say
