"""PyTorch profiler (Kineto) Chrome-trace JSON: the parser (trace), its windowed msgspec
decoding (decode) and the event kinds (kinds)."""
