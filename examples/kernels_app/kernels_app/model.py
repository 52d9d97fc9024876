"""A gated MLP whose forward depends on the data: fine on a GPU, recompiles or fails elsewhere."""

import torch
from torch import nn

from kernels_app import _C
from kernels_app.triton_ops import add


class GatedMLP(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        hidden = self.proj(x)
        active = hidden[hidden > 0]
        if active.numel() > 0 and active.mean().item() > 1.0:
            hidden = hidden / active.mean()
        rows = torch.nonzero(hidden.sum(dim=1) > 0).squeeze(1)
        torch.ops.kernels_app.fused_scale(hidden, 0.5)
        return add(hidden[rows], x[rows])


def build():
    return GatedMLP().cuda(), torch.randn(8, 64, device="cuda")
