"""PC4: distributed training and launch (NCCL, DDP device_ids, CUDA environment variables, device meshes)."""
