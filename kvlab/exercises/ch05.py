"""Exercises of chapter 3.5: identify a broken cache from its first diverging step; fix one.

Relies on :data:`kvlab.teaching_caches.BROKEN_CACHES` (the lab's caches, by id: ``rope_offset``, ``no_reset``,
``k_as_v``, ``off_by_one``, ``one_slot``) and on ``KVCache._store(layer, k, v, end)``, the one method those
caches override. Nothing else of the chapter's lesson module is used.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from functools import lru_cache

import torch

from ..cache import KVCache
from ..generation import generate
from ..language import get_language
from ..phrases import Phrasebook
from ..tokenizer import TOKENIZERS
from . import checker
from .checker import Choice, Exercise, ExerciseText, Verdict, right, todo, wrong
from .tools import demo

NOTEBOOK = "05_misconceptions.ipynb"
SETUP = """from IPython.display import display

from kvlab.exercises import ch05"""

LOGIT_TOLERANCE = 1e-4  # a correct cache stays below 1e-5
NEW_TOKENS = 8  # by step 2 every broken cache shows itself, no_reset only on a reused cache (fresh: all 8 right)
# The prompts in each demo model's language; on the English model too, every bug keeps the signature the exercise
# relies on (no_reset: fresh all right, reused wrong from step 1; k_as_v: step 1 both; the other three: step 2 both).
# "Artificial" 1 token, "A computer" 3, "Large language models" 5 on the English model (the previous request is the
# lab's, as in Chinese).
CASE_PROMPTS = Phrasebook("ch05.prompts", {
    "zh": {"first": "人工", "second": "计算", "previous": "大语言模型"},
    "en": {"first": "Artificial", "second": "A computer", "previous": "Large language models"},
})
PROMPTS = (CASE_PROMPTS.text("first", "zh"), CASE_PROMPTS.text("second", "zh"))  # the Chinese model's
PREVIOUS = CASE_PROMPTS.text("previous", "zh")  # the request served first when a cache is reused (Chinese model)
BUG_IDS = ("rope_offset", "no_reset", "k_as_v", "off_by_one", "one_slot")
MYSTERIES = {"X": "no_reset", "Y": "k_as_v"}  # each has a signature no other bug shares

# What the two graders say, in the course's language when they say it (the checker's own words are
# kvlab.exercises.phrases.CHECKER's).
FEEDBACK = Phrasebook("ch05.feedback", {
    "zh": {
        # what a cache shows: the first diverging step, fresh and reused
        "differs_from": "第 {step} 步开始不同",
        "all_same": "{n} 步全部相同",
        "signature": "全新的缓存：{fresh}；先服务过一个请求、reset() 后再用：{reused}",
        "mystery": "神秘缓存 {name}",
        "mystery_row": "{name}：{description}",
        "row_sep": "：",
        # 1. which bug is it?
        "mystery_right": "{mystery} 就是 {truth}：{seen}。",
        "mystery_wrong": "如果 {mystery} 是 {found}，会看到「{would}」；而 {mystery} 是「{seen}」。",
        "answer_wrong": "{name}：{message}",
        "n_wrong": "{n} 个认错了。",
        "n_wrong_one": "{n} 个认错了。",
        "n_wrong_missing": "{n} 个认错了，{missing} 还没填。",
        "n_wrong_missing_one": "{n} 个认错了，{missing} 还没填。",
        "missing_sep": "、",
        "partly": "填了的都对，{missing} 还没填。",
        "identify_right": "都认对了！X 是 no_reset：全新的缓存完全正确，复用时新请求接在旧请求后面，第 1 步就错；"
                          "Y 是 k_as_v：V 里存的是 K，连预填充都算错。",
        # 2. fix one
        "length_changed": "store 改动了 cache.length：store 只负责写入，所有层都写完之后模型才调用 cache.advance(T) 把计数加上去",
        "writing": "第 {layer} 层写入 {T} 个 token",
        "writing_one": "第 {layer} 层写入 {T} 个 token",
        "alone": "单独调用 store，length = {length}，layer = {layer}，T = {T}",
        "other_layer_k": "length = {length} 时写第 {layer} 层，却改动了第 {moved} 层：每一层有自己的一份缓存，要用 cache.k[layer]",
        "other_layer_v": "length = {length} 时写第 {layer} 层，V 却写进了第 {moved} 层：每一层有自己的一份缓存，"
                         "cache.v 也要用 [layer]",
        "k_in_v": "V 的位置写进了 K：cache.v 要存 v",
        "wrote_slots": "写到了第 {slots} 格",
        "wrote_slots_one": "写到了第 {slots} 格",
        "wrote_nothing": "一格都没有写",
        "wrong_slots": "缓存里已有 length = {length} 个 token 时，{T} 个新 token 应写进第 {want} 格"
                       "（[length, length + T)），你的代码{where}",
        "wrong_slots_one": "缓存里已有 length = {length} 个 token 时，{T} 个新 token 应写进第 {want} 格"
                           "（[length, length + T)），你的代码{where}",
        "not_this_kv": "第 {slots} 格里存的不是这次的 k、v",
        "not_this_kv_one": "第 {slots} 格里存的不是这次的 k、v",
        "fresh_cache": "全新的缓存",
        "reused_cache": "复用的缓存",
        "kind_differs": "{kind}第 {step} 步开始与无缓存的参考不同",
        "kind_same": "{kind}全部相同",
        "symptom_sep": "，",
        "stub_symptoms": "这还是原来的代码。用它在提示词「{prompt}」上生成：{said}。第 1 步是预填充：从第 1 步就不同，"
                         "说明预填充写进去的东西已经错了。想一想错在哪一层、哪几格，改好之后再运行这一格。",
        "model_error": "用你的 store 生成时模型报错了：{error}: {line}",
        "cause": "原因：{problem}",
        "case_fresh": "提示词「{prompt}」，全新的缓存",
        "case_reused": "提示词「{prompt}」，先服务过一个请求、reset() 后再用的缓存",
        "case_differs": "{case}：第 {step} 步开始与无缓存的参考不同。",
        "lucky": "生成的结果碰巧都对，但写入的位置不对：{problem}",
        "fix_right": "修好了！两处错误：新 token 要写进 [length, length + T)，V 要写进自己那一层。全新的缓存和复用的缓存，"
                     "{n} 步的 logits 都与无缓存的参考一致。",
    },
    "en": {
        "differs_from": "differs from step {step} on",
        "all_same": "all {n} steps match",
        "signature": "fresh cache: {fresh}; reused after one request and reset(): {reused}",
        "mystery": "Mystery cache {name}",
        "mystery_row": "{name} — {description}",
        "row_sep": " — ",
        "mystery_right": "{mystery} is {truth} ({seen}).",
        "mystery_wrong": "if {mystery} were {found}, you would see \"{would}\"; but {mystery} shows \"{seen}\".",
        "answer_wrong": "{name}: {message}",
        "n_wrong": "{n} caches are misidentified.",
        "n_wrong_one": "{n} cache is misidentified.",
        "n_wrong_missing": "{n} caches are misidentified, and {missing} is still None.",
        "n_wrong_missing_one": "{n} cache is misidentified, and {missing} is still None.",
        "missing_sep": " and ",
        "partly": "the answer you filled in is right; {missing} is still None.",
        "identify_right": "Both right! X is no_reset: on a fresh cache it is entirely correct, but once reused, the new "
                          "request is appended to the old one, so it goes wrong at step 1. Y is k_as_v: V holds K, so "
                          "even the prefill comes out wrong.",
        "length_changed": "store changed cache.length: store only writes; the model calls cache.advance(T) to move the "
                          "count on once every layer has written",
        "writing": "layer {layer} writing {T} tokens",
        "writing_one": "layer {layer} writing {T} token",
        "alone": "store called on its own with length = {length}, layer = {layer}, T = {T}",
        "other_layer_k": "Writing layer {layer} at length = {length} changed layer {moved}: every layer has a cache of "
                         "its own, so use cache.k[layer]",
        "other_layer_v": "Writing layer {layer} at length = {length} put V into layer {moved}: every layer has a cache "
                         "of its own, so cache.v needs [layer] too",
        "k_in_v": "K was written where V belongs: cache.v must store v",
        "wrote_slots": "wrote slots {slots}",
        "wrote_slots_one": "wrote slot {slots}",
        "wrote_nothing": "wrote no slot at all",
        "wrong_slots": "With length = {length} tokens already in the cache, the {T} new tokens belong in slots {want} "
                       "([length, length + T)); your code {where}",
        "wrong_slots_one": "With length = {length} tokens already in the cache, the {T} new token belongs in slot "
                           "{want} ([length, length + T)); your code {where}",
        "not_this_kv": "Slots {slots} do not hold this call's k and v",
        "not_this_kv_one": "Slot {slots} does not hold this call's k and v",
        "fresh_cache": "a fresh cache",
        "reused_cache": "a reused cache",
        "kind_differs": "with {kind} it departs from the uncached reference from step {step} on",
        "kind_same": "with {kind} every step matches",
        "symptom_sep": "; ",
        "stub_symptoms": "this is still the original code. Generating from the prompt \"{prompt}\" with it: {said}. "
                         "Step 1 is the prefill: differing from step 1 on means that what the prefill wrote is already "
                         "wrong. Work out which layer and which slots it got wrong, fix them, then run this cell again.",
        "model_error": "The model raised an error while generating with your store: {error}: {line}",
        "cause": "Cause: {problem}",
        "case_fresh": "Prompt \"{prompt}\", a fresh cache",
        "case_reused": "Prompt \"{prompt}\", a cache that served one request first and was reset()",
        "case_differs": "{case}: departs from the uncached reference from step {step} on.",
        "lucky": "The generated output happens to be right, but the writes land in the wrong place: {problem}",
        "fix_right": "Fixed! There were two bugs: new tokens go into [length, length + T), and V goes into its own "
                     "layer. With a fresh cache and with a reused one, the logits of all {n} steps match the uncached "
                     "reference.",
    },
})
say = FEEDBACK.say


def model_language(tokenizer) -> str:
    """The language of the demo model ``tokenizer`` belongs to (else the course's)."""
    return next((code for code, kind in TOKENIZERS.items() if isinstance(tokenizer, kind)), None) or get_language()


def model_prompts(tokenizer) -> tuple[str, str, str]:
    """The first and second prompt and the previous request, in the language of the demo model ``tokenizer``."""
    lang = model_language(tokenizer)
    return tuple(CASE_PROMPTS.text(key, lang) for key in ("first", "second", "previous"))


def _broken(bug: str) -> type[KVCache]:
    from ..teaching_caches import BROKEN_CACHES

    return BROKEN_CACHES[bug]


def reference_logits(prompt: str) -> torch.Tensor:
    """Logits of every new token of ``prompt`` without a cache, [1, NEW_TOKENS, vocab] (on the demo model now)."""
    return _reference_logits(prompt, model_language(demo()[1]))


@lru_cache(maxsize=None)
def _reference_logits(prompt: str, lang: str) -> torch.Tensor:
    model, tok = demo()
    return generate(model, [tok.encode(prompt)], NEW_TOKENS, cache="none", return_logits=True).logits


@torch.no_grad()
def first_diverging_step(make_cache, prompt: str, reused: bool) -> int | None:
    """1-based step at which the logits with ``make_cache(max_seq_len)`` first leave the uncached reference by more
    than float rounding (None: every step the same). ``reused``: the cache first serves the previous request
    (:data:`PREVIOUS` on the Chinese model), then ``reset()``, as a server reusing one cache would."""
    model, tok = demo()
    first, second = tok.encode(model_prompts(tok)[2]), tok.encode(prompt)
    cache = make_cache(len(first) + len(second) + 2 * NEW_TOKENS)
    if reused:
        generate(model, [first], NEW_TOKENS, cache=cache)
        cache.reset()
    out = generate(model, [second], NEW_TOKENS, cache=cache, return_logits=True)
    diff = (out.logits - reference_logits(prompt)).abs().nan_to_num(float("inf")).amax(dim=-1)[0]  # [NEW_TOKENS]
    return next((i + 1 for i, d in enumerate(diff.tolist()) if d > LOGIT_TOLERANCE), None)


@dataclass(frozen=True)
class Signature:
    """The first diverging step on a fresh cache and on a reused one (the first prompt of :data:`PROMPTS`)."""

    fresh: int | None
    reused: int | None

    def describe(self) -> str:
        """The signature in the course's language."""
        step = lambda s: say("differs_from", step=s) if s else say("all_same", n=NEW_TOKENS)  # noqa: E731
        return say("signature", fresh=step(self.fresh), reused=step(self.reused))


def signature(bug: str) -> Signature:
    """``bug``'s signature on the demo model now (its first prompt)."""
    return _signature(bug, model_language(demo()[1]))


@lru_cache(maxsize=None)
def _signature(bug: str, lang: str) -> Signature:
    model, tok = demo()
    make = lambda n: _broken(bug)(model.config, 1, n, dtype=model.dtype)  # noqa: E731
    first = model_prompts(tok)[0]
    return Signature(first_diverging_step(make, first, False), first_diverging_step(make, first, True))


class MysteryReport:
    """What the learner sees of the two mystery caches."""

    def __init__(self):
        self.rows = {name: signature(bug) for name, bug in MYSTERIES.items()}

    def __repr__(self) -> str:
        return "\n".join(say("mystery_row", name=say("mystery", name=name), description=sig.describe())
                         for name, sig in self.rows.items())

    def _repr_html_(self) -> str:
        rows = "".join(f"<li><b>{html.escape(say('mystery', name=name))}</b>{html.escape(say('row_sep'))}"
                       f"{html.escape(sig.describe())}</li>" for name, sig in self.rows.items())
        return f'<ul class="kvlab-mystery-report">{rows}</ul>'


def mystery_report() -> MysteryReport:
    return MysteryReport()


# == 1. which bug is it? ===================================================================================
IDENTIFY = Exercise(
    key="ch05.identify",
    title="练习 1：从第一个不同的步认出有 bug 的缓存",
    task=f"""下面有两个神秘缓存 X 和 Y，各是上面找 bug 实验里五种有 bug 的缓存之一。下一格用它们分别生成 {NEW_TOKENS} 个 token（提示词「{PROMPTS[0]}」），与无缓存的参考逐步比较 logits，报告第一个不同的步：一次用全新的缓存，一次先用同一块缓存服务上一个请求「{PREVIOUS}」、调用 `reset()` 之后再用。第 1 步是预填充，之后每一步是一次解码。

五种 bug：

* `"rope_offset"`：写入新 token 的 K 时，RoPE 漏掉了位置偏移（按 0、1、2……旋转）；
* `"no_reset"`：`reset()` 忘了把 `length` 置 0；
* `"k_as_v"`：把 K 写进了 V 的位置；
* `"off_by_one"`：新 token 写在 `length − 1`，而不是 `length`；
* `"one_slot"`：所有层都读写第 0 层的那一格。

想一想每种 bug 会不会影响预填充、会不会只在复用缓存时出现，然后填写 `bug_x` 和 `bug_y`。""",
    stub='''display(ch05.mystery_report())
bug_x = None  # "rope_offset", "no_reset", "k_as_v", "off_by_one" or "one_slot"
bug_y = None''',
    check="ch05.check_identify(bug_x, bug_y)",
    hints=(
        "预填充从位置 0 开始、写在第 0 格、每一层先写后读：只有一种 bug 连预填充都会算错。",
        "全新的缓存上从不出错、复用之后第 1 步就错：说明问题出在两个请求之间调用的那个方法里。",
    ),
    english=ExerciseText(
        title="Exercise 1: identify a buggy cache from its first diverging step",
        task=f"""Below are two mystery caches, X and Y, each one of the five buggy caches from the bug-hunt lab above. The next cell has each of them generate {NEW_TOKENS} tokens (prompt "{CASE_PROMPTS.text("first", "en")}"), compares the logits step by step with the uncached reference, and reports the first step that differs: once on a fresh cache, and once on a cache that first served the previous request "{CASE_PROMPTS.text("previous", "en")}" and was then `reset()`. Step 1 is the prefill; every step after it is one decode step.

The five bugs:

* `"rope_offset"`: when the new token's K is written, RoPE leaves out the position offset (it rotates by 0, 1, 2, …);
* `"no_reset"`: `reset()` forgets to set `length` back to 0;
* `"k_as_v"`: K is written where V belongs;
* `"off_by_one"`: the new token is written at `length − 1` instead of `length`;
* `"one_slot"`: every layer reads and writes layer 0's slot.

For each bug, ask yourself whether it affects the prefill and whether it only shows up when the cache is reused, then fill in `bug_x` and `bug_y`.""",
        hints=(
            "The prefill starts at position 0, writes from slot 0, and every layer writes before it reads: only one "
            "of the bugs gets even the prefill wrong.",
            "Never wrong on a fresh cache, but wrong from step 1 once reused: the problem lies in the method called "
            "between the two requests.",
        ),
    ),
)


BUG_CHOICES = [Choice(bug, True, "") for bug in BUG_IDS]


def grade_mystery(mystery: str, answer) -> Verdict:
    """One mystery cache: right, or what the chosen bug would have shown instead (run only for that bug)."""
    found = checker.pick(answer, BUG_CHOICES)
    if isinstance(found, Verdict):
        return found
    truth, seen = MYSTERIES[mystery], signature(MYSTERIES[mystery])
    if found.key == truth:
        return right(say("mystery_right", mystery=mystery, truth=truth, seen=seen.describe()))
    return wrong(say("mystery_wrong", mystery=mystery, found=found.key, would=signature(found.key).describe(),
                     seen=seen.describe()))


def grade_identify(bug_x, bug_y) -> Verdict:
    if bug_x is None and bug_y is None:
        return todo()
    parts = {name: grade_mystery(name, answer) for name, answer in (("X", bug_x), ("Y", bug_y))}
    bad = [say("answer_wrong", name=name, message=v.message) for name, v in parts.items() if v.status == checker.WRONG]
    missing = say("missing_sep").join(f"bug_{name.lower()}" for name, v in parts.items() if v.status == checker.TODO)
    if bad:
        key = ("n_wrong_missing" if missing else "n_wrong") + ("_one" if len(bad) == 1 else "")
        return wrong(say(key, n=len(bad), **({"missing": missing} if missing else {})), *bad)
    if missing:
        return todo(say("partly", missing=missing))
    return right(say("identify_right"))


def check_identify(bug_x, bug_y):
    return checker.check(IDENTIFY, grade_identify, bug_x, bug_y)


# == 2. fix one ==========================================================================================
FIX_STUB = '''def store(cache, layer, k, v):
    # k, v: [B, H_kv, T, D], the T new tokens of this layer; cache.k, cache.v: (L, B, H_kv, S_max, D)
    start = max(cache.length - 1, 0)
    T = k.shape[2]
    cache.k[layer, :, :, start:start + T] = k
    cache.v[min(layer, 1), :, :, start:start + T] = v'''

def _slot_range(slots: list[int]) -> str:
    """「3」 for one slot, 「3–5」 for several."""
    return str(slots[0]) if slots[0] == slots[-1] else f"{slots[0]}–{slots[-1]}"


FIX = Exercise(
    key="ch05.fix",
    title="练习 2：修好一个有 bug 的缓存",
    task=f"""下一格的 `store` 是另一个缓存写入新 token 的代码（它把两种错误组合在一起，形式和上面五个坏缓存的不完全一样）：每一层在每次前向计算里调用一次，把这一次的 T 个新 token 的 K、V 写进预分配的缓存 `cache.k`、`cache.v`（形状 `(L, B, H_kv, S_max, D)`）。这时 `cache.length` 是写入之前已经存好的 token 数；所有层都写完之后，模型才调用 `cache.advance(T)`。

用这个缓存生成，程序不会报错，文字却会悄悄变掉。先不改代码，运行检查格：它会告诉你从第几步开始与无缓存的参考不同——用找 bug 实验室里的经验想一想，这说明错在预填充还是解码、在 K 还是 V。然后找出**所有**错误并改好（改好一处，检查格会报告下一处）。

检查程序会把你的 `store` 装进一个 `KVCache`，先单独调用它检查每一层、每个位置的写入，再用演示模型生成 {NEW_TOKENS} 个 token（全新的缓存和复用的缓存各一次），与无缓存的参考逐步比较。""",
    stub=FIX_STUB,
    check="ch05.check_fix(store)",
    hints=(
        "缓存里已有 cache.length 个 token，它们占了第 0 到 length − 1 格：下一个空位是哪一格？",
        "K 和 V 要写进同一层、同样的几格：逐项对比 cache.k 那一行和 cache.v 那一行的下标。",
    ),
    english=ExerciseText(
        title="Exercise 2: fix a buggy cache",
        task=f"""The `store` in the next cell is how another cache writes new tokens (it combines two bugs, not quite in the form of the five broken caches above). Each layer calls it once per forward pass to write the K and V of that pass's T new tokens into the preallocated cache `cache.k`, `cache.v` (shape `(L, B, H_kv, S_max, D)`). At that point `cache.length` is the number of tokens stored before this write; the model calls `cache.advance(T)` only after every layer has written.

Generating with this cache raises no error, yet the text quietly changes. Before changing any code, run the check cell: it tells you from which step on the output departs from the uncached reference. Think back to the bug-hunt lab: does that point to the prefill or to decoding, to K or to V? Then find **every** bug and fix it (fix one, and the check cell reports the next).

The check plugs your `store` into a `KVCache`, first calls it on its own to check each layer's and each position's writes, then has the demo model generate {NEW_TOKENS} tokens (once on a fresh cache, once on a reused one) and compares them step by step with the uncached reference.""",
        hints=(
            "The cache already holds cache.length tokens, in slots 0 to length − 1: which slot is the next free one?",
            "K and V go into the same layer and the same slots: compare the indices of the cache.k line and the "
            "cache.v line, one by one.",
        ),
    ),
)


LENGTH_CHANGED = FEEDBACK.text("length_changed", "zh")  # said in the course's language (FEEDBACK's "length_changed")


def cache_with_store(store, config, batch_size: int, max_seq_len: int, dtype=None) -> KVCache:
    """A ``KVCache`` whose writes go through the learner's ``store(cache, layer, k, v)``."""
    class LearnerCache(KVCache):
        def _store(self, layer, k, v, end):
            length = self.length
            T = k.shape[2]
            checker.call(store, self, layer, k, v, case=say("writing_one" if T == 1 else "writing", layer=layer, T=T))
            if self.length != length:  # only advance() moves the counter, once per pass
                raise checker.AnswerError(say("length_changed"))

    return LearnerCache(config, batch_size, max_seq_len, dtype=dtype)


def _slots(t: torch.Tensor) -> list[int]:
    """Slots (0-based, along S) of a (B, H_kv, S, D) tensor holding anything but zeros."""
    return [int(i) for i in t.abs().amax(dim=(0, 1, 3)).nonzero()[:, 0]]


def store_problem(store) -> str | None:
    """Call ``store`` on an empty cache the way a prefill of 3 tokens at layer 0 and decode steps at layer 1 and the
    last layer would, and say what went where (in the course's language); None when every write lands in the right
    slots of the right layer."""
    model, _ = demo()
    c = model.config
    cache = cache_with_store(store, c, 1, 8)
    g = torch.Generator().manual_seed(3)
    new = lambda T: torch.randn(1, c.n_kv_head, T, c.head_dim, generator=g) + 3.0  # noqa: E731  (never zero)
    for length, layer, T in ((0, 0, 3), (3, 1, 1), (4, c.n_layer - 1, 1)):  # the prefill, then decode steps
        k, v = new(T), new(T)
        before_k, before_v = cache.k.clone(), cache.v.clone()
        cache.length = length
        checker.call(store, cache, layer, k, v, case=say("alone", length=length, layer=layer, T=T))
        if cache.length != length:
            return say("length_changed")
        moved = [l for l in range(c.n_layer) if l != layer and not torch.equal(cache.k[l], before_k[l])]
        if moved:
            return say("other_layer_k", length=length, layer=layer, moved=moved[0])
        moved_v = [l for l in range(c.n_layer) if l != layer and not torch.equal(cache.v[l], before_v[l])]
        if moved_v:
            return say("other_layer_v", length=length, layer=layer, moved=moved_v[0])
        k_slots = _slots(cache.k[layer] - before_k[layer])
        want = list(range(length, length + T))
        if torch.equal(cache.v[layer, :, :, length:length + T], k) and not torch.equal(k, v):
            return say("k_in_v")
        if k_slots != want:
            wrote = "wrote_slots_one" if len(k_slots) == 1 else "wrote_slots"
            where = say(wrote, slots=_slot_range(k_slots)) if k_slots else say("wrote_nothing")
            return say("wrong_slots_one" if T == 1 else "wrong_slots", length=length, T=T, want=_slot_range(want),
                       where=where)
        if not (torch.equal(cache.k[layer, :, :, length:length + T], k)
                and torch.equal(cache.v[layer, :, :, length:length + T], v)):
            return say("not_this_kv_one" if T == 1 else "not_this_kv", slots=_slot_range(want))
    return None


def stub_symptoms() -> str:
    """What the untouched stub does, from a run: where generation first departs, fresh and reused (the clue)."""
    scope: dict = {}
    exec(FIX_STUB, scope)  # noqa: S102  (kvlab's own stub text)
    model, tok = demo()
    first = model_prompts(tok)[0]
    make = lambda n: cache_with_store(scope["store"], model.config, 1, n, dtype=model.dtype)  # noqa: E731
    steps = [first_diverging_step(make, first, reused) for reused in (False, True)]
    said = say("symptom_sep").join(say("kind_differs", kind=say(kind), step=s) if s else say("kind_same", kind=say(kind))
                                   for kind, s in zip(("fresh_cache", "reused_cache"), steps))
    return say("stub_symptoms", prompt=first, said=said)


def grade_fix(store) -> Verdict:
    problem = checker.unwritten(store, FIX_STUB, "store", stub_symptoms())
    if problem:
        return problem
    problem = checker.refuses_reference(store, {"_store": KVCache._store})
    if problem:
        return problem
    problem = store_problem(store)
    if problem == say("length_changed"):
        return wrong(problem)
    model, tok = demo()
    first, second, _ = model_prompts(tok)
    make = lambda n: cache_with_store(store, model.config, 1, n, dtype=model.dtype)  # noqa: E731
    cause = [say("cause", problem=problem)] if problem else []
    for prompt, reused in ((first, False), (second, True)):
        try:
            step = first_diverging_step(make, prompt, reused)
        except checker.AnswerError as exc:
            return wrong(str(exc))
        except (RuntimeError, ValueError, IndexError) as exc:  # the learner's writes broke the model's shapes
            return wrong(say("model_error", error=type(exc).__name__, line=str(exc).splitlines()[0]), *cause)
        if step is not None:
            case = say("case_reused" if reused else "case_fresh", prompt=prompt)
            return wrong(say("case_differs", case=case, step=step), *cause)
    if problem:
        return wrong(say("lucky", problem=problem))
    return right(say("fix_right", n=NEW_TOKENS))


def check_fix(store):
    return checker.check(FIX, grade_fix, store)


EXERCISES = (IDENTIFY, FIX)
