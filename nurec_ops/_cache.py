"""A small cache of values derived from tensors that stay constant between
calls (a lidar's column table, a camera's distortion coefficients): keyed
on the tensors' identities and version counters, so an in-place change
derives again; derived afresh while torch.compile traces."""
import weakref

import torch

_CACHE = {}  # (what, ids of the tensors) -> (weakrefs to them, their _versions, the derived value)
_CACHE_MAX = 64


def cached(what, tensors, derive):
    """``derive(*tensors)``, cached per the tensors' identities and versions."""
    if torch.compiler.is_compiling():
        return derive(*tensors)
    key = (what,) + tuple(id(t) for t in tensors)
    hit = _CACHE.get(key)
    if hit is not None and all(r() is t and v == t._version for r, v, t in zip(hit[0], hit[1], tensors)):
        return hit[2]
    out = derive(*tensors)
    if len(_CACHE) >= _CACHE_MAX:
        dead = [k for k, v in _CACHE.items() if any(r() is None for r in v[0])]
        for k in dead or list(_CACHE)[: _CACHE_MAX // 2]:
            _CACHE.pop(k, None)
    _CACHE[key] = (tuple(weakref.ref(t) for t in tensors), tuple(t._version for t in tensors), out)
    return out
