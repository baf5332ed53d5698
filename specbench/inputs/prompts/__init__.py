"""Package data: our own prompt sets (chat.jsonl, math.jsonl), read by specbench.inputs.data."""
