"""Running this checkout's scripts (benchmarks, examples) in a fresh process."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repo_env(**extra):
    """os.environ with this checkout first on PYTHONPATH (a subprocess then
    imports its nurec_ops, benchmarks and examples), and ``extra``."""
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([REPO] + ([path] if path else [])), **extra)


def run_benchmark(script, *args, timeout=600):
    """benchmarks/<script> with ``args`` in a fresh process (the checkout's
    environment): its finished process, output as text."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", script), *map(str, args)], env=repo_env(),
                          capture_output=True, text=True, timeout=timeout)
