"""Layer 5, inputs: model loading, embedded GGUF installs, datasets and prompt templates.
Imports core."""
