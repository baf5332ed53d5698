"""``python -m killing K CODE ARGS...``: run the Python source CODE with ``sys.argv[1:]`` = ARGS, its
K-th ``os.replace`` / ``os.rename`` ending the process (``os._exit(137)``, as SIGKILL would: no
cleanup runs; K = 0: never).  ``test_reliability.killed_at`` runs it forked from a server that has
already imported collect and the report (forkserver.py), so each kill point costs the command, not
its imports; only the command's own renames are counted either way."""

import os
import sys

K, n = int(sys.argv[1]), [0]


def killing(orig):
    def f(*a, **kw):
        n[0] += 1
        if n[0] == K:
            os._exit(137)
        return orig(*a, **kw)

    return f


os.replace, os.rename = killing(os.replace), killing(os.rename)
CODE, sys.argv = sys.argv[2], [sys.argv[0], *sys.argv[3:]]
exec(compile(CODE, "<killing>", "exec"), {"__name__": "__main__", "os": os, "sys": sys})
