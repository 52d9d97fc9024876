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


class Noisy(nn.Module):
    """Draws random numbers in forward: dropout in training mode and a noise term."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 6)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dropout(self.linear(x))
        return y + 0.1 * torch.randn_like(y)


def noisy():
    return Noisy(), torch.randn(4, 6)


class CudaCalls(nn.Module):
    """A forward written for CUDA: `how` says which call it makes."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "synchronize":
            torch.cuda.synchronize()
        elif self.how == "tensor":
            x = x.cuda()
        else:  # calls that pass silently without CUDA
            torch.cuda.empty_cache()
            self.allocated = torch.cuda.memory_allocated()
            with torch.cuda.amp.autocast():
                return self.linear(x)
        return self.linear(x)


def synchronizes():
    return CudaCalls("synchronize"), torch.randn(2, 3)


def moves_to_cuda():
    return CudaCalls("tensor"), torch.randn(2, 3)


def silent_cuda_calls():
    return CudaCalls("silent"), torch.randn(2, 3)


class Averages(nn.Module):
    """Keeps a running average in a buffer, which drifts off the CPU; the output does not."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.register_buffer("average", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        drift = 1.0 if x.device.type == "cpu" else 1.01
        self.average.mul_(0.9).add_(0.1 * drift * x.mean(0))
        return self.linear(x)


def averages():
    return Averages(), torch.randn(4, 3)


def batch_norm_in_training():
    model = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.ReLU())
    return model.train(), torch.randn(8, 5)
