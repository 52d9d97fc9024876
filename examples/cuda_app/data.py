"""Random batches; nothing here depends on the device."""

import torch


def random_batches(count, batch_size=32, features=64, classes=10):
    for _ in range(count):
        yield torch.randn(batch_size, features), torch.randint(0, classes, (batch_size,))
