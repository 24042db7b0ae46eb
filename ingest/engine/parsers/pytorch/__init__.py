"""PyTorch dumps: NCCL flight recorder, CUDA memory snapshot, stats and timeline, and per-token latency JSON lines."""
