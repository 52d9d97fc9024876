"""PC7: dependencies and environment: CUDA-only packages imported or declared, CUDA package indexes, torch versions."""
