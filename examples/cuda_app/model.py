import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        if x.is_cuda:
            x = x.contiguous()
        return self.body(x)


def load(path):
    model = TinyNet()
    model.load_state_dict(torch.load(path, map_location="cuda:0"))
    return model
