"""Reference solutions of every exercise, for teachers: each is the exercise's code cell as a learner would fill it in.

Keyed by the exercise's key (``"ch01.cached_step"``). A check cell shows one, inside a collapsed 「显示参考答案」, only
after the learner has checked a real attempt at that exercise, or in teacher mode (see :mod:`kvlab.exercises.checker`);
the static edition only when built with ``--teacher``. ``tests/test_exercises.py`` runs every one of them through its
checker.
"""

SOLUTIONS = {
    # -- 3.1 ------------------------------------------------------------------------------------------
    "ch01.cached_step": '''def cached_attention_step(q, k_new, v_new, k_cache, v_cache, pos):
    q, k_new = rope(q, pos), rope(k_new, pos)  # RoPE at the new token's position
    k_cache[:, :, pos:pos + 1] = k_new  # the cache keeps K already rotated
    v_cache[:, :, pos:pos + 1] = v_new
    n_rep = q.shape[1] // k_cache.shape[1]  # query heads per KV head
    k = repeat_kv(k_cache[:, :, :pos + 1], n_rep)  # [B, H, pos + 1, D]: the filled part only
    v = repeat_kv(v_cache[:, :, :pos + 1], n_rep)
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # [B, H, 1, pos + 1]
    return torch.softmax(scores, dim=-1) @ v  # [B, H, 1, D]''',
    "ch01.work": '''def predict_work(p, n):
    lengths = range(p, p + n)  # t of each forward pass: the prefill sees p, the last decode p + n - 1
    kv_without_cache = sum(lengths)  # every pass projects all t tokens again
    kv_with_cache = p + (n - 1)  # the prompt once, then one token per decode pass
    scores_without_cache = sum(t * t for t in lengths)  # t x t per pass
    scores_with_cache = p * p + sum(lengths[1:])  # the prefill's p x p, then one row of t per pass
    return kv_without_cache, kv_with_cache, scores_without_cache, scores_with_cache''',
    # -- 3.2 ------------------------------------------------------------------------------------------
    "ch02.cache_size": '''preset = MODEL_PRESETS["Llama-3-8B"]
L, H_kv, D = preset.n_layer, preset.n_kv_head, preset.head_dim  # 32, 8 (GQA: not the 32 query heads), 128
S, B, bytes_per_element = 8192, 4, 2  # bf16: 16 bits
answer = 2 * L * B * H_kv * S * D * bytes_per_element  # K and V: 4,294,967,296 bytes = "4 GiB"''',
    "ch02.padding": '''preset = MODEL_PRESETS["Llama-3-8B"]
lengths = [1800, 420, 95, 640]
per_slot = 2 * preset.n_layer * preset.n_kv_head * preset.head_dim * 2  # K and V of one token of one sequence, fp16
allocated = len(lengths) * max(lengths)  # every sequence padded to the longest
padding = (allocated - sum(lengths)) * per_slot  # slots that hold no token''',
    # -- 3.3 ------------------------------------------------------------------------------------------
    "ch03.batch_ridge": '''import itertools

machine = ch03.this_machine(roofs)  # the two roofs this page measured above (the cell `roofs = ...`)
print(machine)
ridge = machine.flops / machine.bandwidth  # (FLOP/s) / (bytes/s) = FLOP per byte


def smallest_batch(context):
    one, two = (pass_cost(ch03.CONFIG, 1, context, B) for B in (1, 2))
    limit = (two.flops - one.flops) / (two.bytes - one.bytes)  # one more sequence: its own FLOPs over its K/V
    if limit <= ridge:  # as B grows the intensity only approaches the limit: no B reaches the ridge
        return 0
    return next(B for B in itertools.count(1) if pass_cost(ch03.CONFIG, 1, context, B).intensity >= ridge)


b_short = smallest_batch(100)
b_long = smallest_batch(1000)''',
    "ch03.ttft_tpot": '''import statistics

traced = ch03.traced_run()
display(ch03.trace_table(traced))
ttft_ms = sum(r.seconds for r in traced.trace if r.phase == "prefill") * 1e3  # every prefill chunk
decode = [r.seconds for r in traced.trace if r.phase == "decode"]
tpot_ms = statistics.fmean(decode) * 1e3  # (end-to-end - TTFT) / (new tokens - 1)
itl_median_ms = statistics.median(decode) * 1e3''',
    # -- 3.4 ------------------------------------------------------------------------------------------
    "ch04.window": '''def cache_bytes(preset, seq_len, batch_size):
    total = 0
    for layer in range(preset.n_layer):
        windowed = preset.layer_is_windowed(layer)  # False for every layer of a model without a window
        kept = min(seq_len, preset.sliding_window) if windowed else seq_len  # tokens this layer keeps
        total += 2 * batch_size * preset.n_kv_head * kept * preset.head_dim * 2  # K and V, fp16
    return total''',
    "ch04.largest_batch": '''card = GPU_PRESETS["A100 80 GB"]
preset = MODEL_PRESETS["Llama-2-13B"]
room = card.memory_bytes * 9 // 10 - preset.n_params * 2  # the usable 0.9 of the card, minus the fp16 weights
per_sequence = 2 * preset.n_layer * preset.n_kv_head * 4096 * preset.head_dim * 2  # one sequence of 4096 tokens
largest_batch = room // per_sequence  # whole sequences only''',
    # -- 3.5 ------------------------------------------------------------------------------------------
    "ch05.identify": '''display(ch05.mystery_report())
bug_x = "no_reset"  # right on a fresh cache, wrong from the prefill on once the cache is reused
bug_y = "k_as_v"  # wrong from the prefill on, fresh or not''',
    "ch05.fix": '''def store(cache, layer, k, v):
    # k, v: [B, H_kv, T, D], the T new tokens of this layer; cache.k, cache.v: (L, B, H_kv, S_max, D)
    start = cache.length  # the next free slot: slots 0 .. length - 1 are taken
    T = k.shape[2]
    cache.k[layer, :, :, start:start + T] = k
    cache.v[layer, :, :, start:start + T] = v''',
    # -- 3.6 ------------------------------------------------------------------------------------------
    "ch06.lookup": '''def lookup(block_table, position, block_size):
    # block_table: the physical block ids of one sequence, in order, e.g. [7, 2, 5]
    # position: which token of the sequence (0, 1, 2, ...); block_size: tokens per block
    block = block_table[position // block_size]  # the table's entry for the sequence's (position // bs)-th block
    offset = position % block_size  # where in that block
    return block, offset''',
    "ch06.blocks": '''import math

lengths = [50 + n for n in (30, 7, 45, 12, 26, 33)]  # the system prompt plus each request's own tokens
without_sharing = sum(math.ceil(n / 16) for n in lengths)  # each sequence's last block may be part empty: 30
full = 50 // 16  # whole blocks of the system prompt: held once (the part-filled 4th is copied by every sharer)
with_sharing = without_sharing - (len(lengths) - 1) * full  # the other five requests skip 3 blocks each: 15''',
}
