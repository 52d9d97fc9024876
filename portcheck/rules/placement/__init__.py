"""PC1: where tensors and modules are placed: "cuda" device strings, .cuda(), .is_cuda, map_location."""
