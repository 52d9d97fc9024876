"""Small models for the smoke tests: each factory returns what a user's would."""

import os
import time

import torch
from torch import nn

from portcheck.smoke.case import SmokeCase


def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)), torch.randn(5, 8)


def cnn():
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 2),
    )
    return SmokeCase(model=model.eval(), inputs=torch.randn(2, 3, 8, 8))


class Block(nn.Module):
    """A pre-norm transformer block."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def transformer_block():
    return {
        "model": Block(),
        "inputs": torch.randn(2, 6, 16),
        "loss_fn": lambda out, inputs: out.pow(2).mean(),
        "optimizer": lambda params: torch.optim.AdamW(params, lr=1e-3),
        "alternate_inputs": [torch.randn(2, 7, 16), torch.randn(2, 9, 16)],
    }


class DeviceBranch(nn.Module):
    """Computes something else off the CPU: the kind of bug a parity run exists to catch."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if x.device.type != "cpu":
            y = y * 1.01
        return y


def device_branch():
    return DeviceBranch(), torch.randn(3, 4)


class Misbehaves(nn.Module):
    """Crashes or hangs its process off the CPU, as a broken backend plugin can."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.linear = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu":
            if self.how == "crash":
                os.abort()
            time.sleep(600)
        return self.linear(x)


def crashes():
    return Misbehaves("crash"), torch.randn(1, 2)


def hangs():
    return Misbehaves("hang"), torch.randn(1, 2)


def not_a_case():
    return 42
