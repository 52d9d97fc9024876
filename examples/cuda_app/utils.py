import random

import torch


def seed_everything(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def log_memory():
    if torch.cuda.is_available():
        used = torch.cuda.max_memory_allocated() / 2**20
        print(f"{torch.cuda.get_device_name()}: peak {used:.0f} MiB")
        torch.cuda.empty_cache()
