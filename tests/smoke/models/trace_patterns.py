"""Small models for tests/smoke/test_trace.py, one pattern each; `# at: NAME` marks the line a
finding must point at."""

from __future__ import annotations

import torch


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # at: mlp
        return self.layers(x)


class Nonzero(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        index = torch.nonzero(y)  # at: nonzero
        return index.float().sum() + y.sum()


class MaskIndexing(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + 1
        kept = y[y > 1]  # at: mask
        return kept.sum()


class Item(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.sum().item()  # at: item
        return x * scale


class FloatOfMean(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(x.mean())  # at: float
        return x * scale


class Branch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # at: branch
            return x * 2
        return x - 1


class Unique(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.unique(x)  # at: unique


class Inlined(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return positions(x * 2)


def positions(y: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(y)  # at: inlined


class Failing(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("the model's own error")
