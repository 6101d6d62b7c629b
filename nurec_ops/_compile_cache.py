"""Keeps torch.compile's on-disk caches from serving graphs compiled against
another version of our operators.

Inductor's FX graph cache keys a graph on its printed code, and the printed
code calls an operator with positional arguments only. The code Inductor
generates, which is what the cache stores, calls the same operator with the
schema's argument names. So when a new build renames an argument and keeps
its position (ours renamed ``shutter_params`` to ``viewmats_end``), the
cache still hits, and the stored code calls the new library with a name it
no longer has: ``Unknown keyword argument 'shutter_params'``. A changed fake
kernel (an output's shape or dtype) is not in the key either.

The fix is to put what the cache cannot see into the key: a digest of every
schema in our namespace and of the Python files that hold our fake kernels
and autograd formulas, appended to ``torch.compiler.config.cache_key_tag``
(hashed into the FX graph cache's key details, which the AOTAutograd
cache's extend). The tag changes only when those change, so the caches keep
working across runs of the same build; a user's own tag is kept, with ours
after it.
"""
import hashlib
import os

import torch


def schema_digest(namespace, files=()):
    """A short hex digest of every operator schema in ``namespace`` and of the
    contents of ``files``."""
    h = hashlib.sha256()
    prefix = namespace + "::"
    for name in sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith(prefix)):
        op, _, overload = name.partition(".")
        h.update(str(torch._C._get_schema(op, overload)).encode())
        h.update(b"\n")
    for path in sorted(files):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def tag_compile_cache(namespace, files=()):
    """Appends ``namespace:<digest>`` to torch.compile's cache key tag, in place
    of an earlier tag for the same namespace (a re-registration in one process).
    Returns the tag now in force."""
    config = torch.compiler.config
    mine = f"{namespace}:{schema_digest(namespace, files)}"
    kept = [t for t in config.cache_key_tag.split(";") if t and not t.startswith(namespace + ":")]
    config.cache_key_tag = ";".join(kept + [mine])
    return config.cache_key_tag


def package_files():
    """Our package's top-level Python files: the fake kernels, the autograd
    formulas and the wrappers whose traced graphs the caches store."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, f) for f in os.listdir(here) if f.endswith(".py")]
