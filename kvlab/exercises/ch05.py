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
from . import checker
from .checker import Choice, Exercise, Verdict, right, todo, wrong
from .tools import demo

NOTEBOOK = "05_misconceptions.ipynb"
SETUP = """from IPython.display import display

from kvlab.exercises import ch05"""

LOGIT_TOLERANCE = 1e-4  # a correct cache stays below 1e-5
NEW_TOKENS = 8  # by step 2 every broken cache shows itself, no_reset only on a reused cache (fresh: all 8 right)
PROMPTS = ("人工", "计算")
PREVIOUS = "大语言模型"  # the request served first when a cache is reused
BUG_IDS = ("rope_offset", "no_reset", "k_as_v", "off_by_one", "one_slot")
MYSTERIES = {"X": "no_reset", "Y": "k_as_v"}  # each has a signature no other bug shares


def _broken(bug: str) -> type[KVCache]:
    from ..teaching_caches import BROKEN_CACHES

    return BROKEN_CACHES[bug]


@lru_cache(maxsize=None)
def reference_logits(prompt: str) -> torch.Tensor:
    """Logits of every new token of ``prompt`` without a cache, [1, NEW_TOKENS, vocab]."""
    model, tok = demo()
    return generate(model, [tok.encode(prompt)], NEW_TOKENS, cache="none", return_logits=True).logits


@torch.no_grad()
def first_diverging_step(make_cache, prompt: str, reused: bool) -> int | None:
    """1-based step at which the logits with ``make_cache(max_seq_len)`` first leave the uncached reference by more
    than float rounding (None: every step the same). ``reused``: the cache first serves :data:`PREVIOUS`, then
    ``reset()``, as a server reusing one cache would."""
    model, tok = demo()
    first, second = tok.encode(PREVIOUS), tok.encode(prompt)
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
        say = lambda s: f"第 {s} 步开始不同" if s else f"{NEW_TOKENS} 步全部相同"  # noqa: E731
        return f"全新的缓存：{say(self.fresh)}；先服务过一个请求、reset() 后再用：{say(self.reused)}"


@lru_cache(maxsize=None)
def signature(bug: str) -> Signature:
    model, _ = demo()
    make = lambda n: _broken(bug)(model.config, 1, n, dtype=model.dtype)  # noqa: E731
    return Signature(first_diverging_step(make, PROMPTS[0], False), first_diverging_step(make, PROMPTS[0], True))


class MysteryReport:
    """What the learner sees of the two mystery caches."""

    def __init__(self):
        self.rows = {name: signature(bug) for name, bug in MYSTERIES.items()}

    def __repr__(self) -> str:
        return "\n".join(f"神秘缓存 {name}：{sig.describe()}" for name, sig in self.rows.items())

    def _repr_html_(self) -> str:
        rows = "".join(f"<li><b>神秘缓存 {name}</b>：{html.escape(sig.describe())}</li>" for name, sig in self.rows.items())
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
)


BUG_CHOICES = [Choice(bug, True, "") for bug in BUG_IDS]


def grade_mystery(mystery: str, answer) -> Verdict:
    """One mystery cache: right, or what the chosen bug would have shown instead (run only for that bug)."""
    found = checker.pick(answer, BUG_CHOICES)
    if isinstance(found, Verdict):
        return found
    truth, seen = MYSTERIES[mystery], signature(MYSTERIES[mystery])
    if found.key == truth:
        return right(f"{mystery} 就是 {truth}：{seen.describe()}。")
    return wrong(f"如果 {mystery} 是 {found.key}，会看到「{signature(found.key).describe()}」；"
                 f"而 {mystery} 是「{seen.describe()}」。")


def grade_identify(bug_x, bug_y) -> Verdict:
    if bug_x is None and bug_y is None:
        return todo()
    parts = {name: grade_mystery(name, answer) for name, answer in (("X", bug_x), ("Y", bug_y))}
    bad = [f"{name}：{v.message}" for name, v in parts.items() if v.status == checker.WRONG]
    missing = [f"bug_{name.lower()}" for name, v in parts.items() if v.status == checker.TODO]
    if bad:
        return wrong(f"{len(bad)} 个认错了" + (f"，{'、'.join(missing)} 还没填" if missing else "") + "。", *bad)
    if missing:
        return todo(f"填了的都对，{'、'.join(missing)} 还没填。")
    return right("都认对了！X 是 no_reset：全新的缓存完全正确，复用时新请求接在旧请求后面，第 1 步就错；"
                 "Y 是 k_as_v：V 里存的是 K，连预填充都算错。")


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
)


LENGTH_CHANGED = "store 改动了 cache.length：store 只负责写入，所有层都写完之后模型才调用 cache.advance(T) 把计数加上去"


def cache_with_store(store, config, batch_size: int, max_seq_len: int, dtype=None) -> KVCache:
    """A ``KVCache`` whose writes go through the learner's ``store(cache, layer, k, v)``."""
    class LearnerCache(KVCache):
        def _store(self, layer, k, v, end):
            length = self.length
            checker.call(store, self, layer, k, v, case=f"第 {layer} 层写入 {k.shape[2]} 个 token")
            if self.length != length:  # only advance() moves the counter, once per pass
                raise checker.AnswerError(LENGTH_CHANGED)

    return LearnerCache(config, batch_size, max_seq_len, dtype=dtype)


def _slots(t: torch.Tensor) -> list[int]:
    """Slots (0-based, along S) of a (B, H_kv, S, D) tensor holding anything but zeros."""
    return [int(i) for i in t.abs().amax(dim=(0, 1, 3)).nonzero()[:, 0]]


def store_problem(store) -> str | None:
    """Call ``store`` on an empty cache the way a prefill of 3 tokens at layer 0 and decode steps at layer 1 and the
    last layer would, and say what went where; None when every write lands in the right slots of the right layer."""
    model, _ = demo()
    c = model.config
    cache = cache_with_store(store, c, 1, 8)
    g = torch.Generator().manual_seed(3)
    new = lambda T: torch.randn(1, c.n_kv_head, T, c.head_dim, generator=g) + 3.0  # noqa: E731  (never zero)
    for length, layer, T in ((0, 0, 3), (3, 1, 1), (4, c.n_layer - 1, 1)):  # the prefill, then decode steps
        k, v = new(T), new(T)
        before_k, before_v = cache.k.clone(), cache.v.clone()
        cache.length = length
        checker.call(store, cache, layer, k, v, case=f"单独调用 store，length = {length}，layer = {layer}，T = {T}")
        if cache.length != length:
            return LENGTH_CHANGED
        moved = [l for l in range(c.n_layer) if l != layer and not torch.equal(cache.k[l], before_k[l])]
        if moved:
            return f"length = {length} 时写第 {layer} 层，却改动了第 {moved[0]} 层：每一层有自己的一份缓存，要用 cache.k[layer]"
        moved_v = [l for l in range(c.n_layer) if l != layer and not torch.equal(cache.v[l], before_v[l])]
        if moved_v:
            return (f"length = {length} 时写第 {layer} 层，V 却写进了第 {moved_v[0]} 层：每一层有自己的一份缓存，"
                    "cache.v 也要用 [layer]")
        k_slots = _slots(cache.k[layer] - before_k[layer])
        want = list(range(length, length + T))
        if torch.equal(cache.v[layer, :, :, length:length + T], k) and not torch.equal(k, v):
            return "V 的位置写进了 K：cache.v 要存 v"
        if k_slots != want:
            where = f"写到了第 {_slot_range(k_slots)} 格" if k_slots else "一格都没有写"
            return (f"缓存里已有 length = {length} 个 token 时，{T} 个新 token 应写进第 {_slot_range(want)} 格"
                    f"（[length, length + T)），你的代码{where}")
        if not (torch.equal(cache.k[layer, :, :, length:length + T], k)
                and torch.equal(cache.v[layer, :, :, length:length + T], v)):
            return f"第 {_slot_range(want)} 格里存的不是这次的 k、v"
    return None


def stub_symptoms() -> str:
    """What the untouched stub does, from a run: where generation first departs, fresh and reused (the clue)."""
    scope: dict = {}
    exec(FIX_STUB, scope)  # noqa: S102  (kvlab's own stub text)
    model, _ = demo()
    make = lambda n: cache_with_store(scope["store"], model.config, 1, n, dtype=model.dtype)  # noqa: E731
    steps = [first_diverging_step(make, prompt, reused) for prompt, reused in ((PROMPTS[0], False), (PROMPTS[0], True))]
    said = "，".join(f"{kind}第 {s} 步开始与无缓存的参考不同" if s else f"{kind}全部相同"
                    for kind, s in zip(("全新的缓存", "复用的缓存"), steps))
    return (f"这还是原来的代码。用它在提示词「{PROMPTS[0]}」上生成：{said}。第 1 步是预填充：从第 1 步就不同，"
            "说明预填充写进去的东西已经错了。想一想错在哪一层、哪几格，改好之后再运行这一格。")


def grade_fix(store) -> Verdict:
    problem = checker.unwritten(store, FIX_STUB, "store", stub_symptoms())
    if problem:
        return problem
    problem = checker.refuses_reference(store, {"_store": KVCache._store})
    if problem:
        return problem
    problem = store_problem(store)
    if problem == LENGTH_CHANGED:
        return wrong(problem)
    model, _ = demo()
    make = lambda n: cache_with_store(store, model.config, 1, n, dtype=model.dtype)  # noqa: E731
    for prompt, reused in ((PROMPTS[0], False), (PROMPTS[1], True)):
        try:
            step = first_diverging_step(make, prompt, reused)
        except checker.AnswerError as exc:
            return wrong(str(exc))
        except (RuntimeError, ValueError, IndexError) as exc:  # the learner's writes broke the model's shapes
            return wrong(f"用你的 store 生成时模型报错了：{type(exc).__name__}: {str(exc).splitlines()[0]}",
                         *([f"原因：{problem}"] if problem else []))
        if step is not None:
            case = f"提示词「{prompt}」，{'先服务过一个请求、reset() 后再用的缓存' if reused else '全新的缓存'}"
            return wrong(f"{case}：第 {step} 步开始与无缓存的参考不同。", *([f"原因：{problem}"] if problem else []))
    if problem:
        return wrong(f"生成的结果碰巧都对，但写入的位置不对：{problem}")
    return right(f"修好了！两处错误：新 token 要写进 [length, length + T)，V 要写进自己那一层。全新的缓存和复用的缓存，"
                 f"{NEW_TOKENS} 步的 logits 都与无缓存的参考一致。")


def check_fix(store):
    return checker.check(FIX, grade_fix, store)


EXERCISES = (IDENTIFY, FIX)
