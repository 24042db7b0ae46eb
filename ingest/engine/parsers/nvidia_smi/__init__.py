"""nvidia-smi outputs: query CSV, dmon, pmon, `-q` text and `-q -x` XML, with the helpers they share (common)."""
