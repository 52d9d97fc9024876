"""kernels_app: a model that leans on custom CUDA and Triton kernels."""
