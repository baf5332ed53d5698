"""The study's job: a config composed by Hydra and checked once (``argv``, ``schema``, ``plugins``,
``errors``), read into the typed job spec (``jobspec``), checked across fields (``checks``),
fingerprinted (``identity``), run (``context``, ``run``, ``launch``, ``progress``, ``sweepjobs``) into
its folder (``jobfiles``, ``describe``) and merged into results/ (``collect``, ``jobrows``, ``optimum``).  Imports
core, results, trees, verify, drafting, engine and inputs.  It sits below the study's tools and its
serving bridge and imports neither."""
