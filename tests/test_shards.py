"""NUREC_TEST_SHARD (conftest.py): K processes that each take shard k/K of a
selection run every selected test exactly once between them, so the GPU
suite can run as parallel shards within one device call
(benchmarks/device/gpu_tests.sh)."""
import subprocess
import sys

import pytest

from conftest import shard_of
from run_scripts import REPO, repo_env

FILE = "tests/test_collect.py"  # CPU and GPU tests: the shards split what -m selects


def collected(*args, shard=None):
    env = repo_env(**({"NUREC_TEST_SHARD": shard} if shard is not None else {}))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", FILE, *args],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return r, [line for line in r.stdout.splitlines() if "::" in line]


def test_shards_partition_the_selection():
    marker = "gpu"  # half of FILE's tests (collected, not run: no GPU needed)
    _, whole = collected("-m", marker)
    assert len(whole) >= 6, "too few tests to split"
    shards = [collected("-m", marker, shard=f"{k}/3")[1] for k in range(3)]
    assert sorted(sum(shards, [])) == sorted(whole)  # each once: none lost, none twice
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # even


def test_bad_shard_refused():
    r, _ = collected(shard="3/3")  # a whole run refuses it, saying why
    assert r.returncode != 0 and "NUREC_TEST_SHARD" in r.stdout + r.stderr
    for spec in ("-1/2", "one", "1/0", "1/2/3"):
        with pytest.raises(pytest.UsageError, match="NUREC_TEST_SHARD"):
            shard_of(spec)
    assert shard_of("2/4") == (2, 4)
