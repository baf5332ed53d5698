"""Layer 5, the engine: the ONE decode loop, its verifiers (live target, cached continuation) and rank
replay of static shapes.  Imports core, trees, verify, drafting.  (The public entry point, ``specbench.api``,
builds on the study layer's job context.)"""
