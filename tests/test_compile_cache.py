"""torch.compile's on-disk caches never serve a graph compiled against other
schemas of our ops (nurec_ops/_compile_cache.py says why they would).

The scenario is replayed in two processes that share one cache directory: the
first defines a throwaway op ``f(Tensor x, float a)`` and compiles a call to it
with Inductor; the second defines ``f(Tensor x, float b)``, the same op with its
argument renamed, as a new build of a library would, and compiles the same
function. Without the tag the second process runs the first one's stored code
and fails; with it, it compiles afresh."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import nurec_ops
from nurec_ops._compile_cache import schema_digest, tag_compile_cache

pytestmark = pytest.mark.filterwarnings("ignore")

SCRIPT = textwrap.dedent("""
    import sys, torch
    from nurec_ops._compile_cache import tag_compile_cache
    arg, tag = sys.argv[1], sys.argv[2] == "tag"
    lib = torch.library.Library("nurec_cachetest", "DEF")
    lib.define(f"f(Tensor x, float {arg}=2.0) -> Tensor")
    lib.impl("f", lambda x, v=2.0: x * v, "CompositeExplicitAutograd")
    torch.library.register_fake("nurec_cachetest::f", lambda x, v=2.0: torch.empty_like(x), lib=lib)
    if tag:
        tag_compile_cache("nurec_cachetest")
    fn = torch.compile(lambda x: torch.ops.nurec_cachetest.f(x) + 1, fullgraph=True, backend="inductor")
    x = torch.arange(4.0)
    assert torch.equal(fn(x), x * 2 + 1)
""")


def _run(tmp_path, arg, mode):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TORCH_COMPILE_CACHE_KEY_TAG="")
    return subprocess.run([sys.executable, "-c", SCRIPT, arg, mode], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("mode", ["tag", "none"])
def test_renamed_argument_misses_the_cache(tmp_path, mode):
    first = _run(tmp_path, "a", mode)
    assert first.returncode == 0, first.stderr[-3000:]
    second = _run(tmp_path, "b", mode)
    if mode == "tag":
        assert second.returncode == 0, second.stderr[-3000:]
    elif second.returncode == 0:
        pytest.skip("this torch keys its cache on schemas itself; the tag is then belt and braces")
    else:
        # The control: the failure the tag exists for (so the test above can fail).
        assert "Unknown keyword argument 'a'" in second.stderr, second.stderr[-3000:]


def test_tag_is_in_force_and_follows_schemas():
    tag = torch.compiler.config.cache_key_tag
    assert f"nurec_ops:{schema_digest('nurec_ops', nurec_ops._package_files())}" in tag.split(";")
    lib = torch.library.Library("nurec_cachetest2", "DEF")
    lib.define("g(Tensor x) -> Tensor")
    before = schema_digest("nurec_cachetest2")
    lib.define("h(Tensor x, int n) -> Tensor")
    assert schema_digest("nurec_cachetest2") != before


def test_tag_keeps_the_users_and_replaces_its_own(monkeypatch):
    monkeypatch.setattr(torch.compiler.config, "cache_key_tag", "mine;nurec_ops:0000")
    tag = tag_compile_cache("nurec_ops", nurec_ops._package_files())
    parts = tag.split(";")
    assert parts[0] == "mine" and "nurec_ops:0000" not in parts
    assert sum(p.startswith("nurec_ops:") for p in parts) == 1
