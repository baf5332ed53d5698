"""Layer 4, the engine: the ONE decode loop, its verifiers (live target, cached continuation), rank
replay of static shapes, and the public entry point (api).  Imports core, trees, verify, drafting."""
