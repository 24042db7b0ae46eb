"""Text logs (parser) and the line classifiers it uses, one module per family of messages;
also NCCL RAS status as JSON (nccl_ras_json), read like its text report."""
