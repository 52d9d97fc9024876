"""PC3: precision and mixed precision (torch.cuda.amp, autocast device and dtype, TF32, cuDNN, float64)."""
