"""Layer 7, the study, in three packages whose imports go down: ``job`` (a job from its config to its
folder and results/: the config composed by Hydra and checked once, the typed job spec, run, collect),
``tools`` (the measurement tools and the study's plan: costs, calibration, the lossless check, margins,
ceilings, the speed benchmark and the default run's budget; they import the job) and ``serving`` (a
configuration as a serving engine's settings and a server's measurements back; it imports the job and
the tools).  Imports every layer below (core, results, trees, verify, drafting, engine, inputs).
Imported by report (torch-free tools), attention (``job.argv``) and the top-level entry points
(``specbench.api``, ``specbench.run`` ...)."""

from .job import resolvers  # noqa: F401  (conf/config.yaml's folder resolvers)
