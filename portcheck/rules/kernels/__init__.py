"""PC6: custom kernels: Triton, CUDA C++ extensions and sources, CUDA-only op registrations, CUDA Python libraries."""
