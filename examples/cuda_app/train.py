"""Train a small classifier on random data, written for NVIDIA GPUs as many scripts are."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.cuda.amp import GradScaler, autocast

from data import random_batches
from model import TinyNet
from utils import log_memory, seed_everything


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--epochs", type=int, default=2)
    return parser.parse_args()


def setup_distributed():
    if "WORLD_SIZE" not in os.environ:
        return 0
    os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["LOCAL_RANK"]
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    return dist.get_rank()


def main():
    args = parse_args()
    rank = setup_distributed()
    seed_everything(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True

    model = TinyNet().cuda()
    if dist.is_initialized():
        model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = GradScaler()

    for epoch in range(args.epochs):
        start = time.perf_counter()
        for x, y in random_batches(10):
            x = x.to(args.device)
            y = y.cuda(non_blocking=True)
            with autocast():
                loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        torch.cuda.synchronize()
        print(f"epoch {epoch}: {time.perf_counter() - start:.2f}s loss {loss.item():.3f}")
        log_memory()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
