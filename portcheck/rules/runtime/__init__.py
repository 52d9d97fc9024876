"""PC2: the CUDA runtime API (torch.cuda.*, torch.version.cuda, torch.backends.cuda.*)."""
