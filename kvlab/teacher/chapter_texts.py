"""What the chapter guides say, in both languages: :data:`CHAPTER_TEXTS`.

The Chinese is :data:`kvlab.teacher.chapters.CHAPTERS`' own text, read from it under keys that name where it stands
(``"01.objective.3"``: the notebook ``01_…``'s third objective); the English below is written for the same keys, so
``tests/test_phrases.py`` fails when a chapter guide gains a sentence with no English. In-text tasks
(:data:`kvlab.lessons.checkpoints.TASKS`) quote the notebook; their English quote is the English chapter's phrase.
"""
from __future__ import annotations

from ..lessons.checkpoints import TASKS
from ..phrases import Phrasebook
from .chapters import CHAPTERS, ChapterGuide


def chapter_id(guide: ChapterGuide) -> str:
    """``"01"`` for ``01_autoregressive_decode.ipynb``."""
    return guide.notebook.split("_", 1)[0]


def guide_texts(guide: ChapterGuide) -> dict[str, str]:
    """The chapter guide's Chinese sentences by key."""
    c = chapter_id(guide)
    out = {}
    out.update({f"{c}.prerequisite.{i}": t for i, t in enumerate(guide.prerequisites, 1)})
    out.update({f"{c}.discussion.{i}": t for i, t in enumerate(guide.discussion, 1)})
    out.update({f"{c}.objective.{i}": o.text for i, o in enumerate(guide.objectives, 1)})
    out.update({f"{c}.builds_on.{i}": what for i, (_, what) in enumerate(guide.builds_on, 1)})
    out.update({f"{c}.optional.{i}": why for i, why in enumerate(guide.optional_sections.values(), 1)})
    out.update({f"{c}.reference.{i}": s.claim for i, s in enumerate(guide.references, 1)})
    out.update({f"{c}.further.{i}": s.claim for i, s in enumerate(guide.further_reading, 1)})
    if guide.optional_chapter:
        out[f"{c}.optional_chapter"] = guide.optional_chapter
    return out


def task_key(notebook: str, i: int) -> str:
    return f"task.{notebook.split('_', 1)[0]}.{i}"


def _zh() -> dict[str, str]:
    out = {}
    for g in CHAPTERS:
        out.update(guide_texts(g))
    for notebook in dict.fromkeys(t.notebook for t in TASKS):
        for i, t in enumerate((t for t in TASKS if t.notebook == notebook), 1):
            out[task_key(notebook, i)] = t.quote
    return out


_EN = {
    # -- 3.1 --------------------------------------------------------------------------------------------------
    "01.prerequisite.1": "basic PyTorch tensor operations in Python: shapes, slicing, matrix multiplication (`@`), "
                         "`softmax`;",
    "01.prerequisite.2": "self-attention in a Transformer decoder: softmax(QKᵀ/√d)·V, multi-head attention, the causal "
                         "mask;",
    "01.prerequisite.3": "what tokens, a vocabulary and logits are (at each step the model outputs a probability "
                         "distribution over the next token).",
    "01.discussion.1": "(Ask after counting the work and before timing anything.) When the generated length n goes from "
                       "64 to 128, how many times as many tokens get their K/V projected without a cache, and how many "
                       "times as many attention scores? With a cache? Write down a prediction, then predict whether the "
                       "measured total time grows by the same factor. After seeing this machine's curves, say where it "
                       "differs: the fixed overhead, the t² term, or a busy machine?",
    "01.discussion.2": "With a cache, each step projects K/V for just one new token, yet the step time is not constant. "
                       "Where does the part that grows with t come from? With a larger model and a longer context, "
                       "would it become most of a step's time?",
    "01.discussion.3": "Why can the K and V of earlier tokens be cached, while their Q is never needed? Without the "
                       "causal mask (every token sees the tokens after it), would the cache still work?",
    "01.objective.1": "say what goes into and comes out of each step of autoregressive generation, and point out in a "
                      "kvlab trace which forward pass is the prefill and which are decode steps",
    "01.objective.2": "explain why, under the causal mask, a new token never changes the K and V of earlier tokens, so "
                      "they can be cached",
    "01.objective.3": "write one cached attention step (RoPE applied to the new token before it is written to the cache, "
                      "KV heads expanded with repeat_kv under GQA) that passes every case of the checker",
    "01.objective.4": "given a prompt length p and a generated length n, count the tokens whose K/V are projected and "
                      "the attention scores computed with and without a cache, and say where n³/3 and n²/2 come from",
    "01.objective.5": "read the step-time curves measured on their own machine and tell apart the fixed overhead, the "
                      "part that grows linearly with t and the t² part",
    "01.optional.1": "a closer look, off the main line, at how a cached step's time grows with t; skip it when time "
                     "is short",
    "01.reference.1": "scaled dot-product attention softmax(QKᵀ/√d)·V, multi-head attention and the decoder's causal "
                      "mask: where the chapter's two formulas come from.",
    "01.reference.2": "rotary position embedding (RoPE): the cache holds K already rotated by position (exercise 1).",
    "01.reference.3": "multi-query attention (MQA): all query heads share one K/V (one of exercise 1's cases).",
    "01.reference.4": "grouped-query attention (GQA): a few query heads share one K/V; the demo model has 4 query heads "
                      "and 2 KV heads.",
    "01.reference.5": "the LLaMA architecture the demo model follows: RMSNorm before each block, a SwiGLU MLP, RoPE.",
    # -- 3.2 --------------------------------------------------------------------------------------------------
    "02.prerequisite.1": "3.1 (why K/V can be cached);",
    "02.prerequisite.2": "the bytes per element of the common data types: FP32 4 bytes, FP16/BF16 2 bytes, INT8 1 byte;",
    "02.prerequisite.3": "the difference between GiB (2³⁰ bytes) and GB (10⁹ bytes).",
    "02.discussion.1": "Predict, then check with the panel: with the same number of layers and head size, if a GQA model "
                       "with 8 KV heads becomes multi-head attention where every query head has its own K/V (32 heads), "
                       "how many times larger is the cache?",
    "02.discussion.2": "Growing the cache by concatenation copies about n²/2 extra tokens in all, yet on this machine it "
                       "may take about as long as preallocation. Explain why. Once the cache is larger than the CPU's "
                       "last-level cache (L3), what do you predict for the two curves?",
    "02.discussion.3": "A batch of 4 sequences of lengths 1,000, 100, 100 and 100: padded to the longest, how many slots "
                       "stand empty? With paging in blocks of 16 tokens, at most how many? Why does paging's waste not "
                       "depend on the longest sequence?",
    "02.objective.1": "say what each dimension of the cache shape (L, B, H, S, D) means, and that H is the number of KV "
                      "heads, not of query heads",
    "02.objective.2": "compute a real model's (Llama-3-8B) cache size exactly with 2 × L × B × H × S × D × bytes per "
                      "element, and check that the formula agrees with what the tensors really take",
    "02.objective.3": "compare a preallocated cache with one grown by concatenation: how much each allocates and copies "
                      "(concatenation copies about n²/2 tokens in all), and the matching StaticCache and DynamicCache "
                      "in transformers",
    "02.objective.4": "compute the slots and bytes wasted when a batch of sequences of different lengths is padded to the "
                      "longest, and explain how paging in blocks limits the waste to each sequence's last block",
    "02.objective.5": "read off the plot of cache size against S the longest length one GPU can hold with the cache "
                      "alone (weights not counted); the budget with the weights comes in 3.4",
    "02.builds_on.1": "the cache holds every layer's K and V for every token",
    "02.optional.1": "checks the original's table against real models' published configurations; 3.4's calculator "
                     "uses these models again",
    "02.reference.1": "transformers' DynamicCache (grown by concatenation) and StaticCache (preallocated): the chapter "
                      "compares them with kvlab's caches on the same weights.",
    "02.reference.2": "the H in the cache formula is the number of KV heads: a GQA model's cache shrinks with it.",
    "02.reference.3": "the Llama-3-8B architecture of exercises 1 and 2: 32 layers, 8 KV heads, head size 128.",
    "02.reference.4": "padding a batch to its longest sequence wastes much of the cache; paging (PagedAttention) cuts "
                      "the cache into blocks, and only each sequence's last block is partly wasted.",
    "02.reference.5": "the GPT-2 architecture (layers, heads, hidden size) in the original's table of typical values.",
    # -- 3.3 --------------------------------------------------------------------------------------------------
    "03.prerequisite.1": "3.1 and 3.2;",
    "03.prerequisite.2": "the work of a matrix multiplication: [m, k] × [k, n] takes about 2·m·k·n floating-point "
                         "operations (FLOPs);",
    "03.prerequisite.3": "memory bandwidth (GB/s) and compute (FLOP/s); terms such as RMSNorm, SwiGLU and "
                         "language-model head are in GLOSSARY.md.",
    "03.discussion.1": "Before moving the prompt-length slider, predict: when P goes from 8 to 64, how many times as "
                       "long does one prefill forward pass take? And the tokens processed per second? Then explain this "
                       "machine's numbers: do they agree with where the pass sits on the roofline?",
    "03.discussion.2": "Before running the batching cell, predict: how many times as long is a step at B = 32 as at "
                       "B = 1, and the throughput? Then explain with this machine's numbers: which side of the ridge "
                       "point does a decode step at batch 1 fall on, and how does its arithmetic intensity change as "
                       "the batch grows? Why does a longer context make a bigger batch pay off less?",
    "03.discussion.3": "Which phase decides the time to first token (TTFT), and which the time per output token (TPOT)? "
                       "Which matters more to a chat application and which to an offline job that writes summaries in "
                       "bulk, and how would each choose its batch size?",
    "03.objective.1": "read the time to first token (TTFT) and the decode steps' times from the trace of a real "
                      "generation, and say how many forward passes prefill and decode each made",
    "03.objective.2": "map the original's four steps onto particular lines of kvlab's source, and say the cache's length "
                      "after each step",
    "03.objective.3": "compute a forward pass's floating-point operations, bytes read and written and arithmetic "
                      "intensity, and decide from this machine's roofline whether it is memory-bound or compute-bound",
    "03.objective.4": "explain why prefill processes many times as many tokens per second as decode",
    "03.objective.5": "explain why batching raises decode throughput, and why a longer context, whose K/V belong to each "
                      "sequence alone, leaves less for batching to share; find the smallest batch that takes decode "
                      "past the ridge point",
    "03.objective.6": "(optional) explain why left padding with a mask gives the same result as running alone and what "
                      "it costs, and how many bytes an FP16 or INT8 cache saves and with how much error",
    "03.builds_on.1": "prefill and decode; each step projects only 1 new token",
    "03.builds_on.2": "the cache-size formula, preallocation, padding",
    "03.optional.1": "how the arithmetic-intensity formula is counted and checked against PyTorch's FLOP counter; the "
                     "main text uses only the counts it gives",
    "03.optional.2": "small matrix-multiplication experiments and the overlap of computing and reading data: why this "
                     "machine departs from the ideal roofline; the conclusions vary from machine to machine",
    "03.optional.3": "the original's three engineering points (preallocation and the GPU allocator, prompts of "
                     "different lengths, FP16 and INT8 caches); preallocation and padding were measured in 3.2, and "
                     "paging is developed in 3.6",
    "03.optional.4": "relevant only with a GPU (a small model on a GPU is bound by launch overhead), and the ridge "
                     "points under FP16 and TF32",
    "03.reference.1": "the roofline model: attainable rate = min(compute, bandwidth × arithmetic intensity), and the "
                      "ridge point separates memory-bound from compute-bound.",
    "03.reference.2": "prefill versus decode in large-model inference: each decode step reads all the weights and the "
                      "K/V, so small batches are bound by memory bandwidth; batching raises decode's arithmetic "
                      "intensity.",
    "03.reference.3": "the memory bandwidth of reading the K/V again at every decode step is one of the bottlenecks: "
                      "that is why fewer KV heads help.",
    "03.reference.4": "serving engines allocate a sequence's cache in blocks (previewing 3.6); reserving for the longest "
                      "length wastes memory.",
    "03.reference.5": "real systems quantize the cache per channel for K and per token for V (the approach the "
                      "chapter's INT8 passage mentions).",
    "03.reference.6": "RMSNorm: the normalization in every layer of the demo model.",
    "03.reference.7": "SwiGLU: the demo model's MLP.",
    "03.further.1": "cutting a long prompt's prefill into chunks scheduled in the same step as other sequences' decode "
                    "(chunked prefill); the chapter's prefill_chunk_size is its simplest form.",
    "03.further.2": "attention itself is often memory-bound too: exact attention that never writes the t × t score "
                    "matrix back to GPU memory. The course does not use it or rely on its conclusions.",
    # -- 3.4 --------------------------------------------------------------------------------------------------
    "04.prerequisite.1": "the cache formula of 3.2;",
    "04.prerequisite.2": "how a model's parameter count relates to its weight bytes (2 bytes per parameter in FP16);",
    "04.prerequisite.3": "the memory of common GPUs (given in the chapter).",
    "04.discussion.1": "Guess before looking at the answer: the original's estimate comes out exactly half too small. "
                       "Which factor is missing? Why can the difference between GB and GiB not explain the half?",
    "04.discussion.2": "Predict first: what is the ratio of the caches of a 70B model with 64 KV heads and with 8? Then "
                       "explain what that means for the number of sequences one GPU can serve at once, and what it "
                       "costs.",
    "04.discussion.3": "A sliding window and MLA both cut the cache's bytes: one cuts how many tokens each layer stores, "
                       "the other how many numbers each token stores. What does each cost? Which model in the "
                       "calculator uses which?",
    "04.objective.1": "run the original's estimate as written, point out which number is wrong and why it comes out "
                      "exactly half too small, and correct it",
    "04.objective.2": "tell GB from GiB, and explain why that difference cannot account for the missing half",
    "04.objective.3": "explain why GQA/MQA shrink the cache with the number of KV heads, and compute the ratio of the "
                      "caches of a 70B model with 64 KV heads and with 8",
    "04.objective.4": "compare the caches of MHA, GQA, MQA, sliding-window and MLA models in the calculator, say what "
                      "each architecture cuts to save bytes, and extend 3.2's cache formula to a model with "
                      "sliding-window layers",
    "04.objective.5": "given a GPU, the weights' precision and the usable share of memory, compute the longest context "
                      "and the largest batch that fit",
    "04.builds_on.1": "the cache-size formula",
    "04.builds_on.2": "preallocation: reserving for the longest length",
    "04.optional.1": "allocates a real cache on the current device to check the formula; the conclusion is the same as "
                     "before, so skip it when time is short",
    "04.reference.1": "LLaMA-7B's architecture: 32 layers, 32 heads, hidden size 4096 (the original's example).",
    "04.reference.2": "Llama-2-70B uses GQA with only 8 KV heads (the original assumed 64).",
    "04.reference.3": "the architectures and context lengths of the Llama-3/3.1 sizes (calculator, GPU budget).",
    "04.reference.4": "GQA: a few query heads share one K/V, and the cache shrinks with the number of KV heads.",
    "04.reference.5": "MQA: all query heads share one K/V (Falcon-7B, StarCoder and Gemma-2B in the calculator).",
    "04.reference.6": "Mistral 7B: GQA (8 KV heads) and sliding-window attention over 4,096 tokens; a window layer's "
                      "cache stops growing with S.",
    "04.reference.7": "Gemma-2: sliding-window layers alternate with global attention layers, so only half of the "
                      "layers' caches grow with S.",
    "04.reference.8": "multi-head latent attention (MLA): each layer caches one compressed latent vector per token "
                      "(plus a short RoPE key) instead of every head's K and V.",
    "04.reference.9": "DeepSeek-V3 keeps MLA (the architecture in the calculator).",
    "04.reference.10": "GPT-2's architecture (calculator).",
    "04.reference.11": "paging does not reduce the bytes computed; it removes the waste and fragmentation that "
                       "reservations cause.",
    "04.further.1": "when only a recent window of the cache is kept, keeping the first few tokens (attention sinks) "
                    "lets a model not trained with a window go on generating stably; the course covers only models "
                    "trained with a window.",
    # -- 3.5 --------------------------------------------------------------------------------------------------
    "05.prerequisite.1": "3.1–3.4.",
    "05.discussion.1": "The weights' checksum is identical before and after generating: which claim does this experiment "
                       "rule out? Someone says 'the longer the KV cache gets, the more the model learns': which of this "
                       "chapter's readouts would you use to answer them?",
    "05.discussion.2": "Predict which is faster, caching only K or no cache at all, then look at this machine's readout. "
                       "By the counts, caching only K still does more than 95% of the work of no cache: why? If the "
                       "readout says it cannot tell, what does that tell you?",
    "05.discussion.3": "Why does reserving each sequence's cache for the longest length mean that one GPU can serve "
                       "fewer sequences at once? How much should be reserved, and what would you need to know about "
                       "the requests' distribution to decide?",
    "05.objective.1": "show by experiment that the KV cache is not a model parameter: the weights' checksum does not "
                      "change with generation, and the bytes written to the cache equal B × S × bytes per token",
    "05.objective.2": "explain why caching only K saves almost no time: an earlier token's V in a layer depends on its "
                      "hidden state in that layer, so recomputing V means rerunning every layer before it",
    "05.objective.3": "explain why reserving a cache for the longest length for each sequence reduces the number of "
                      "sequences a fixed amount of memory can serve at once, and compute that number",
    "05.objective.4": "tell a cache bug's kind from the step at which the logits first go wrong, and fix a buggy cache",
    "05.objective.5": "complete the self-check covering 3.1–3.5 and explain every question's answer",
    "05.builds_on.1": "why the cache is correct and what each step computes",
    "05.builds_on.2": "the cache's shape and bytes",
    "05.builds_on.3": "the timing of prefill and decode",
    "05.builds_on.4": "the memory budget",
    "05.optional.1": "the panel for misconception 1: change the length and batch by hand and watch what the previous "
                     "cell already proved; skip it when time is short",
    "05.optional.2": "how the budget check refuses a request that does not fit before allocating it: an engineering "
                     "detail that misconception 3's conclusion does not depend on",
    "05.optional.3": "a summary table of the whole course's measurements, all of whose readouts have appeared before; "
                     "good for review after class",
    "05.reference.1": "when memory is reserved for the longest length, only a small part of the KV-cache memory really "
                      "holds tokens (the paper's figure 2); request lengths vary widely (its figure 11).",
    "05.reference.2": "Orca, the comparison in the vLLM paper's figure 2 (reserving for the longest or the actual "
                      "length).",
    "05.reference.3": "under the causal mask a token's K and V depend only on itself and the tokens before it: that is "
                      "why K and V can be cached and Q need not be.",
    # -- 3.6 --------------------------------------------------------------------------------------------------
    "06.prerequisite.1": "3.2's padding waste and paging blocks, 3.5's reserving for the longest length;",
    "06.prerequisite.2": "(helpful) paging and page tables in operating systems.",
    "06.discussion.1": "Change the block size from 4 to 16, then to 64: first predict how the wasted slots and the "
                       "length of the block tables change, then check with the panel. How should the block size be "
                       "chosen?",
    "06.discussion.2": "Continuous batching lets waiting requests join sooner: what does it do to throughput and to the "
                       "time to first token (TTFT)? Does any request get slower (hint: preemption)?",
    "06.discussion.3": "A paged cache in plain PyTorch does one extra gather per step. Predict: with a longer context "
                       "and a bigger batch, does the extra time grow or shrink? Then check whether this machine's "
                       "readout can tell; if it cannot, why not?",
    "06.objective.1": "given a block table and a block size, find the physical block and slot that hold a sequence's "
                      "i-th token",
    "06.objective.2": "compute how many blocks a set of sequences needs when paged and how many slots it wastes, and "
                      "compare with padding and with reserving a fixed length",
    "06.objective.3": "compute the blocks a shared system prompt saves, and say when copy-on-write happens",
    "06.objective.4": "explain the difference between continuous and static batching and what it does to throughput and "
                      "time to first token; say how the scheduler preempts when the block pool runs out",
    "06.objective.5": "explain why a paged cache in plain PyTorch does an extra gather per step, and how a real "
                      "PagedAttention kernel avoids it",
    "06.builds_on.1": "the figure of padding waste and paging blocks",
    "06.builds_on.2": "the waste of reserving a fixed length",
    "06.builds_on.3": "batched decode",
    "06.optional.1": "the serving engine finds shared blocks by hashing on its own, and the time to first token is "
                     "measured; the shared prefix's block count and copy-on-write were covered just before",
    "06.optional.2": "measures what paging costs in plain PyTorch; not needed to understand paging itself",
    "06.reference.1": "a paged KV cache: fixed-size blocks, a block pool, block tables, reference counts and "
                      "copy-on-write, and preemption (recompute or swap out) when blocks run short.",
    "06.reference.2": "iteration-level scheduling (continuous batching): at every step's boundary finished sequences "
                      "can leave and new requests join.",
    "06.further.1": "chunked prefill: a long prompt's prefill cut into chunks and scheduled in the same step as other "
                    "sequences' decode (mentioned in the chapter's 'What's next').",
    "06.optional_chapter": "Not part of the original's chapter 3: the techniques the earlier chapters point to but never "
                           "run. Take it after 3.1–3.5.",
    # -- in-text tasks: the English chapter's phrase ---------------------------------------------------------------
    "task.01.1": "find every step at which the two heads attend most to the **same** token",
}

CHAPTER_TEXTS = Phrasebook("teacher.chapters", {"zh": _zh(), "en": _EN})


def say(key: str, lang: str | None = None) -> str:
    """A chapter guide's sentence (never formatted: the texts hold no fields)."""
    return CHAPTER_TEXTS.text(key, lang)
