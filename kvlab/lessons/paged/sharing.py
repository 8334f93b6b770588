"""Shared prefixes on the real model: requests that start with the same system prompt, generated on a paged cache
with and without sharing its blocks; the blocks counted, the copy-on-write copies counted, the outputs compared.
Then the serving engine's own sharing (kvlab.serving): the same kind of requests served with it off and on, the
blocks and prefill tokens counted and the TTFT measured, said by a claim (kvlab.claims)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...generation import generate
from ...measure import leave_a_core
from ...memory import stored_tokens
from ...model import ToyTransformer
from ...paged_cache import PagedKVCache
from ...paging import SharedPrefix, shared_prefix_blocks
from ...claims import Chooser, Claim, Rule, number, ratio
from ...serving import Request, serve
from .batching import (BAND, Rounds, _all, _all_above, _all_below, _gain, _least, _ms, _ratio_of, _rounds, _within,
                       one_sided, one_sided_templates, one_sided_templates_en, serve_in_rounds)
from .runs import BLOCK_SIZE, corpus_ids

SHARE_PREFIX, SHARE_REQUESTS, SHARE_NEW_TOKENS = 40, 4, 16  # the real run's defaults
QUESTION_TOKENS = 10  # each request's own part after the system prompt
MAX_SHARE_PREFIX = 200  # the slider's bounds: every request fits the demo model's 256 tokens
MAX_SHARE_REQUESTS = 16
SYSTEM_START = 0  # the system prompt is the corpus's first MAX_SHARE_PREFIX tokens


def system_prompt(tokenizer, length: int) -> list[int]:
    return corpus_ids(tokenizer)[SYSTEM_START:SYSTEM_START + positive_int("length", length, maximum=MAX_SHARE_PREFIX)]


def questions(tokenizer, count: int, length: int = QUESTION_TOKENS) -> list[list[int]]:
    """``count`` different questions of ``length`` tokens cut from the corpus, each starting with a different token
    (so that no two requests share more than the system prompt)."""
    ids = corpus_ids(tokenizer)
    out, firsts, at = [], set(), MAX_SHARE_PREFIX
    while len(out) < count:
        if at + length > len(ids):
            raise ValueError(f"count: the corpus has too few different first tokens for {count} questions")
        if ids[at] not in firsts:
            firsts.add(ids[at])
            out.append(ids[at:at + length])
        at += 7
    return out


@dataclass(frozen=True)
class SharingRun:
    """The same requests generated on a paged cache without and with shared prefixes, counted and compared."""

    arithmetic: SharedPrefix  # what kvlab.paging says for the lengths the run reached
    plain_blocks: int  # blocks in use at the end, measured in the pool
    shared_blocks: int
    copies: int  # copy-on-write copies the pool made
    plain_prefill_tokens: int  # tokens the prefill passes fed
    shared_prefill_tokens: int
    same_tokens: bool
    max_logit_diff: float

    @property
    def matches_arithmetic(self) -> bool:
        a = self.arithmetic
        return (self.plain_blocks, self.shared_blocks, self.copies) == (a.unshared, a.shared, a.copies)


@leave_a_core
@torch.no_grad()
def sharing_run(model: ToyTransformer, tokenizer, prefix: int = SHARE_PREFIX, requests: int = SHARE_REQUESTS,
                block_size: int = BLOCK_SIZE, new_tokens: int = SHARE_NEW_TOKENS) -> SharingRun:
    """``requests`` prompts of the same ``prefix``-token system prompt and their own question, ``new_tokens`` each."""
    requests = positive_int("requests", requests, maximum=MAX_SHARE_REQUESTS)
    system = system_prompt(tokenizer, prefix)
    prompts = [system + q for q in questions(tokenizer, requests)]
    peak = stored_tokens(len(prompts[0]), positive_int("new_tokens", new_tokens, maximum=32))
    results = {}
    for share in (False, True):
        cache = PagedKVCache(model.config, requests, peak, dtype=model.dtype, device=model.device,
                             block_size=block_size, share_prefixes=share)
        results[share] = (generate(model, prompts, new_tokens, cache=cache, return_logits=True), cache)
    (plain, plain_cache), (shared, shared_cache) = results[False], results[True]
    return SharingRun(
        arithmetic=shared_prefix_blocks(prefix, shared_cache.lengths, block_size),
        plain_blocks=plain_cache.pool.in_use, shared_blocks=shared_cache.pool.in_use, copies=shared_cache.pool.copies,
        plain_prefill_tokens=_prefill_tokens(plain), shared_prefill_tokens=_prefill_tokens(shared),
        same_tokens=torch.equal(plain.tokens, shared.tokens),
        max_logit_diff=float((plain.logits - shared.logits).abs().max()))


def _prefill_tokens(result) -> int:
    """Tokens the prefill passes fed, all rows together."""
    return sum(p.new_tokens * p.rows for p in result.trace if p.phase == "prefill")


# -- the serving engine shares by itself: blocks, prefill tokens and TTFT, with sharing off and on ----------------
SERVE_SYSTEM = 4 * BLOCK_SIZE  # a system prompt of whole blocks, as an application's would be
SERVE_REQUESTS, SERVE_NEW_TOKENS, SERVE_ROUNDS = 8, 16, 3
SETTINGS = {"plain": False, "shared": True}  # Rounds' key -> serve(share_prefixes=...)


def system_prompt_requests(tokenizer, count: int = SERVE_REQUESTS, system: int = SERVE_SYSTEM,
                           new_tokens: int = SERVE_NEW_TOKENS) -> list[Request]:
    """``count`` requests of one ``system``-token system prompt and their own question, arriving one a step."""
    head = system_prompt(tokenizer, system)
    return [Request(rid, rid, tuple(head + q), new_tokens) for rid, q in enumerate(questions(tokenizer, count))]


@dataclass(frozen=True)
class SharedServing(Rounds):
    """The same requests served (continuous batching) with prefix sharing off ("plain") and on ("shared")."""

    def blocks(self, key: str) -> int:
        return self.first(key).peak_blocks

    def prefill_tokens(self, key: str) -> int:
        return self.first(key).prefill_tokens

    @property
    def ttft_ratio(self) -> float:
        """Shared over plain mean TTFT, from each step's fastest round."""
        return ratio(self.ttft_mean("shared"), self.ttft_mean("plain"))

    @property
    def round_ratios(self) -> list[float]:
        """Per round: shared over plain mean TTFT, each from that round's own step times."""
        return [ratio(self.ttft_mean("shared", k), self.ttft_mean("plain", k)) for k in range(len(self.runs["plain"]))]

    def same_tokens(self) -> bool:
        first = [o.tokens for o in self.first("plain").outcomes]
        return all([o.tokens for o in run.outcomes] == first for runs in self.runs.values() for run in runs)


@leave_a_core
def serve_sharing(model: ToyTransformer, tokenizer, rounds: int = SERVE_ROUNDS,
                  requests: list[Request] | None = None) -> SharedServing:
    """Serve :func:`system_prompt_requests` with prefix sharing off and on, in alternating rounds."""
    requests = system_prompt_requests(tokenizer) if requests is None else requests
    runners = {k: (lambda share=share: serve(model, requests, block_size=BLOCK_SIZE, share_prefixes=share))
               for k, share in SETTINGS.items()}
    warm = {k: (lambda share=share: serve(model, requests[:2], block_size=BLOCK_SIZE, share_prefixes=share))
            for k, share in SETTINGS.items()}
    runs, where, threads = serve_in_rounds(model, runners, warm, rounds)
    return SharedServing(runs, str(model.device), threads, where)


# -- its TTFT, as a claim (kvlab.claims); the blocks and tokens are counted, not measured -----------------------
TTFT_FIELDS = ("plain_ttft", "shared_ttft", "ratio", "rounds")
SERVE_TTFT = Chooser("paged.sharing_ttft", (
    Rule("paged.sharing_ttft.shorter", (*TTFT_FIELDS, "gain"),
         lambda v: v["ratio"] * (1 + BAND) <= 1 and _all_below(v["rounds"]) and _gain(v, v["ratio"])
         and _ratio_of(v["ratio"], v["shared_ttft"], v["plain_ttft"], 0.01, 0.01)),
    Rule("paged.sharing_ttft.same", TTFT_FIELDS,
         lambda v: _within(v["ratio"]) and all(map(_within, _all(v["rounds"])))
         and _ratio_of(v["ratio"], v["shared_ttft"], v["plain_ttft"], 0.01, 0.01)),
    Rule("paged.sharing_ttft.longer", (*TTFT_FIELDS, "gain"),
         lambda v: v["ratio"] >= 1 + BAND and _all_above(v["rounds"]) and _gain(v, v["ratio"])
         and _ratio_of(v["ratio"], v["shared_ttft"], v["plain_ttft"], 0.01, 0.01), substantive=False),
    *one_sided("paged.sharing_ttft", "longer", "shorter", TTFT_FIELDS,
               lambda v: _ratio_of(v["ratio"], v["shared_ttft"], v["plain_ttft"], 0.01, 0.01)),
    Rule("paged.sharing_ttft.unclear", TTFT_FIELDS, substantive=False),
    Rule("paged.sharing_ttft.unmeasured", substantive=False),
))
CHOOSERS = (SERVE_TTFT,)


def explain_sharing(s: SharedServing) -> list[Claim]:
    """The TTFT with sharing off and on (:data:`CHOOSERS`), from each step's fastest round and from every round."""
    r = s.ttft_ratio
    return [SERVE_TTFT.choose({"plain_ttft": _ms(s.ttft_mean("plain")), "shared_ttft": _ms(s.ttft_mean("shared")),
                               "ratio": number(r, 2), "rounds": _rounds(s.round_ratios),
                               "gain": number(100 * abs(r - 1), 0, "%"), "least": _least(s.round_ratios)})]


_RERUN = "重跑这一格（serve_sharing 的 rounds 可以调到 5，多测几轮）；机器忙时先关掉别的占 CPU 的程序。"
_HEAD = ("首 token 延迟（TTFT）平均：不共享 {plain_ttft}，共享 {shared_ttft}（每一步取几轮里最快的一次），比值 {ratio}；"
         "每一轮单独算的比值 {rounds}")
ZH_TEMPLATES = {
    "paged.sharing_ttft.shorter": _HEAD + "。共享让首 token 延迟短了 {gain}：后来的请求只预填充系统提示词之后的部分，"
                                  "它加入的那一步短了。",
    "paged.sharing_ttft.same": _HEAD + f"：每一轮都相差不到 {BAND:.0%}。在这台设备上，少喂这些 token 几乎不省时间："
                               "一次前向的耗时主要是固定的开销（GPU 上的这个小模型就是这样，一步主要花在逐个启动内核上），"
                               "不随喂入的 token 数变。省下的块和计算照样是真的。",
    "paged.sharing_ttft.longer": _HEAD + "：这一次共享反而慢了 {gain}，与少算的 token 方向相反：多半是机器忙，"
                                 "共享那几轮的步被拖慢了；" + _RERUN,
    **one_sided_templates("paged.sharing_ttft", _HEAD, "longer|共享时的首 token 延迟更长", "shorter|共享时的首 token 延迟更短",
                          "首 token 延迟", _RERUN),
    "paged.sharing_ttft.unclear": _HEAD + f"：几轮的比值和总的比值对不上，或者没有一边差出 {BAND:.0%} 以上：这台机器太忙"
                                  "（或太吵），这次说不准共享让首 token 延迟短了多少；" + _RERUN,
    "paged.sharing_ttft.unmeasured": "这一次首 token 延迟没有测出有效的数（计时为 0 或不是一个数）；" + _RERUN,
}

TEMPLATES = ZH_TEMPLATES  # what Catalog.of_topics reads for Chinese

# -- the same claim in English (Catalog.of_topics reads TEMPLATES_EN): the same keys, the same fields ----------------
_RERUN_EN = ("rerun this cell (you can raise serve_sharing's rounds to 5 to time more rounds); on a busy machine, "
             "close other CPU-hungry programs first.")
_HEAD_EN = ("Mean time to first token (TTFT): without sharing {plain_ttft}, with sharing {shared_ttft} (each step timed "
            "at its fastest round), ratio {ratio}; each round's own ratio: {rounds}")
TEMPLATES_EN = {
    "paged.sharing_ttft.shorter": _HEAD_EN + ". Sharing cuts the time to first token by {gain}: each later request "
                                  "prefills only what follows the system prompt, so the step it joins in is shorter.",
    "paged.sharing_ttft.same": _HEAD_EN + f": within {BAND:.0%} in every round. On this device, feeding fewer tokens "
                               "saves almost no time: a forward pass costs mostly fixed overhead (as with this small "
                               "model on a GPU, where a step goes mostly into launching kernels one by one), whatever "
                               "the number of tokens fed. The blocks and the compute saved are real all the same.",
    "paged.sharing_ttft.longer": _HEAD_EN + ": this time sharing is {gain} slower, the opposite of what computing "
                                 "fewer tokens would do: most likely the machine was busy and slowed the steps of the "
                                 "sharing rounds; " + _RERUN_EN,
    **one_sided_templates_en("paged.sharing_ttft", _HEAD_EN, "longer|the time to first token is longer with sharing",
                             "shorter|the time to first token is shorter with sharing", "time to first token",
                             _RERUN_EN),
    "paged.sharing_ttft.unclear": _HEAD_EN + f": the rounds' ratios do not match the combined one, or neither side is "
                                  f"ahead by more than {BAND:.0%}: this machine is too busy (or too noisy) to tell by "
                                  "how much sharing shortens the time to first token; " + _RERUN_EN,
    "paged.sharing_ttft.unmeasured": "This run measured no valid time to first token (a time of 0, or not a number); "
                                     + _RERUN_EN,
}
