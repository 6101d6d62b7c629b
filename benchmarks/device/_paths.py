"""sys.path for the maintainers' scripts of this folder: the repository root
(this checkout's nurec_ops), benchmarks/ (timing, scenes and the bench_*
modules the scripts build on) and this folder, first to last. A script here
imports it before any of those:

    import _paths  # noqa: F401  (benchmarks/device/_paths.py)

Its own folder is on sys.path already when it runs as a script, or when a
test puts it there to import it.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))  # benchmarks/device
BENCH = os.path.dirname(HERE)  # benchmarks
ROOT = os.path.dirname(BENCH)  # the repository

for _p in (HERE, BENCH, ROOT):
    sys.path.insert(0, _p)
