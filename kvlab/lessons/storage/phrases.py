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

say = CELLS.say
