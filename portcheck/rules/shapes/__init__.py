"""PC5: dynamic shapes and host syncs: what recompiles on TPU/XLA/Gaudi and fails on Trainium."""
