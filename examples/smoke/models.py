"""Smoke cases for `make smoke-demo`: `portcheck smoke examples/smoke/models.py:classifier ...`."""

import torch
from torch import nn


def classifier():
    """A small classifier, its inputs, a loss for --train, and inputs of two other batch sizes."""
    return {
        "model": nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)),
        "inputs": torch.randn(4, 8),
        "loss_fn": lambda out, inputs: out.logsumexp(-1).mean(),
        "alternate_inputs": [torch.randn(5, 8), torch.randn(6, 8)],  # each new shape recompiles on tpu
    }


class TopTokens(nn.Module):
    """Keeps the tokens whose score passes a threshold: a data-dependent shape."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = self.score(x).squeeze(-1) > 0
        return x[keep].sum(0)  # the size of x[keep] depends on the data


def token_filter():
    """Runs on the CPU and on TPU (with a graph break), but Neuron rejects it: try
    `--device neuron --emulate`."""
    return TopTokens(), torch.randn(6, 8)
