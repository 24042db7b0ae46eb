"""Host profilers: `perf script`, `perf trace` and bpftrace output."""
