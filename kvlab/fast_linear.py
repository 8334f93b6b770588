"""A bias-free linear layer with input-major weights, and the CPU split-K path for decode steps.

A decode step multiplies one row per sequence by each weight matrix. On a CPU a
matrix-vector product runs on a single core and is limited by how fast that core can
stream the weights; cutting the input dimension into one slice per core and summing
the partial products lets every core stream its share (``python -m kvlab.bench``
measures the gain). Storing W as (in, out) lets a one-row product read W contiguously.
"""
from __future__ import annotations

import torch
import torch.nn as nn

SPLIT_K_MAX_ROWS = 8  # inputs of at most this many rows (decode-sized) take the split-K path on CPU


def split_k_matmul(x: torch.Tensor, w: torch.Tensor, parts: int) -> torch.Tensor:
    """``x @ w`` with the input dimension cut into ``parts`` slices, multiplied in one batched matmul.

    x [..., in], w [in, out] with ``in % parts == 0`` -> [..., out].
    """
    *lead, n_in = x.shape
    xs = x.reshape(-1, parts, n_in // parts).transpose(0, 1)  # [rows, in] -> [parts, rows, in/parts]
    ws = w.view(parts, n_in // parts, w.shape[1])  # [in, out] -> [parts, in/parts, out]
    # torch.bmm, not @: matmul's broadcasting wrapper adds about ten small ops per call, which a
    # decode step (49 of these products) pays on every token.
    return torch.bmm(xs, ws).sum(0).view(*lead, w.shape[1])  # [parts, rows, out] -> [..., out]


class Linear(nn.Module):
    """``y = x @ W`` without bias, ``W`` stored as (in_features, out_features).

    The same math as ``nn.Linear`` (which stores W transposed, see ``kvlab.interop``).
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if w.device.type == "cpu" and x.numel() <= SPLIT_K_MAX_ROWS * w.shape[0]:
            parts = torch.get_num_threads()
            if parts > 1 and w.shape[0] % parts == 0:
                return split_k_matmul(x, w, parts)
        return x @ w
