"""`python -m specbench.collect`: the command-line entry point kept at this path
(the code is specbench.study.job.collect)."""

from specbench.study.job.collect import main

if __name__ == "__main__":
    main()
