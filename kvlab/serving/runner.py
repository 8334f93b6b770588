"""The model runner: one step's passes, unchecked. Every request was checked once when it entered
(:func:`kvlab.serving.workload.check_requests`) and the block manager has taken every block the passes write
into, so a timed step runs only ``forward_unchecked`` on prepared tensors: no argument check, no block taken, no
host synchronisation (the new tokens stay on the device until the step's time is taken)."""
from __future__ import annotations

import torch

from ..model import ToyTransformer
from ..paged_cache import BlockPool, PagedKVCache
from .scheduler import StepPlan

Pass = tuple[torch.Tensor, PagedKVCache]  # token ids [B, T] on the device, the rows' blocks ready for T more tokens


class Runner:
    """Runs a :class:`StepPlan`'s passes on ``model`` over ``pool``: each prefill in its own pass (the prompt's
    tokens not found in shared blocks), then one decode pass over every decoding sequence."""

    def __init__(self, model: ToyTransformer, pool: BlockPool):
        self.model, self.pool = model, pool

    def prepare(self, plan: StepPlan) -> list[Pass]:
        """The step's inputs and cache views, built before the timed passes."""
        device, passes = self.model.device, []
        for s in plan.prefill:
            feed = s.tokens[s.table.length:]  # what shared blocks do not hold already
            passes.append((torch.tensor([feed], dtype=torch.long, device=device),  # [1, n]
                           PagedKVCache.grown(self.pool, [s.table], len(feed))))
        if plan.decode:
            ids = torch.tensor([[s.tokens[-1]] for s in plan.decode], dtype=torch.long, device=device)  # [B, 1]
            passes.append((ids, PagedKVCache.grown(self.pool, [s.table for s in plan.decode], 1)))
        return passes

    @torch.no_grad()
    def run(self, passes: list[Pass]) -> list[torch.Tensor]:
        """The timed part: each pass's greedy next tokens [B], left on the device."""
        return [self.model.forward_unchecked(ids, view, None, last_logits_only=True)[:, -1].argmax(-1)
                for ids, view in passes]

    @staticmethod
    def tokens(out: list[torch.Tensor]) -> list[int]:
        """The new tokens in the plan's order (prefills, then decodes), read after the step was timed."""
        return [t for o in out for t in o.tolist()]
