"""`python -m specbench.run`: the command-line entry point kept at this path (the code is specbench.study.job.run)."""

from specbench.study.job.run import cli

if __name__ == "__main__":
    cli()
