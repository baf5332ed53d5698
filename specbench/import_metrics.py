"""`python -m specbench.import_metrics`: the command-line entry point kept at this path
(the code is specbench.study.serving.import_metrics)."""

from specbench.study.serving.import_metrics import main

if __name__ == "__main__":
    main()
