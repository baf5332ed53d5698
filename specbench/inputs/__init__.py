"""Layer 6, inputs: model loading, embedded GGUF installs, datasets and prompt templates.
Imports core, results (``record``: the machine record's reader) and drafting (``models`` asks the drafter registry, ``drafting.drafters.DRAFTERS``,
what a pair's drafter needs: a draft model, its own tokenizer, its pair keys)."""
