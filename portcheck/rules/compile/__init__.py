"""PC8: torch.compile settings that assume CUDA: CUDA-graph modes, backends per target."""
