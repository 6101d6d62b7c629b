"""The drop-in swap (SPEC section 5): replace the pure-PyTorch reference
functions a training loop uses by the fused ops, in a module or an object,
and put them back on exit.

    import my_trainer
    with nurec_ops.swap(my_trainer) as s:   # or: s = nurec_ops.swap(my_trainer); ...; s.restore()
        print(s)                            # what was swapped
        my_trainer.train()
"""
import inspect
import logging

from . import reference

log = logging.getLogger("nurec_ops")

# public op name -> where the fused op lives (resolved lazily: an op family
# that is not built into this package is simply not swappable)
SWAPPABLE = ("interpolate_track_poses", "collect_gaussian_parameters", "collect", "rasterize_camera", "camera_visible",
             "rasterize_lidar", "rasterize_rays", "quat_scale_to_covar_preci", "gather_rows", "adam_rows_")


def _fused(name):
    import nurec_ops

    return getattr(nurec_ops, name, None)


def _params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


class Swap:
    """Handle of one swap: `swapped` lists the names replaced; `restore()`
    (or leaving the `with` block) puts the originals back."""

    def __init__(self, target, names=None):
        self.target = target
        self.swapped = []
        self._originals = {}
        wanted = SWAPPABLE if names is None else tuple(names)
        plan = {}
        for name in wanted:
            if name not in SWAPPABLE:
                raise ValueError(f"nurec_ops.swap: `{name}` is not a swappable op; swappable: {', '.join(SWAPPABLE)}")
            fused, ref = _fused(name), getattr(reference, name, None)
            if fused is None or ref is None:
                if names is not None:
                    raise ValueError(f"nurec_ops.swap: `{name}` is not available in this build of nurec_ops")
                continue
            if not hasattr(target, name):
                if names is not None:
                    raise AttributeError(f"nurec_ops.swap: {_describe(target)} has no attribute `{name}` to swap")
                continue
            current = getattr(target, name)
            if not callable(current):
                raise TypeError(f"nurec_ops.swap: {_describe(target)}.{name} is not callable")
            try:
                same = _params(current) == _params(ref)
            except (TypeError, ValueError):  # no signature (e.g. a builtin)
                same = False
            if not same:
                raise TypeError(
                    f"nurec_ops.swap: {_describe(target)}.{name} has signature {_signature(current)}, "
                    f"but nurec_ops.{name} has {_signature(ref)}; refusing to swap a function that is not "
                    f"the reference's twin")
            plan[name] = fused
        if not plan:
            raise ValueError(f"nurec_ops.swap: {_describe(target)} has none of {', '.join(wanted)}")
        for name, fused in plan.items():  # all checks passed: now change the target
            self._originals[name] = _own_attribute(target, name)
            # on a class, a plain function would be bound to the instance
            # (self as `means`): store it as the staticmethod it replaces
            setattr(target, name, staticmethod(fused) if inspect.isclass(target) else fused)
            self.swapped.append(name)
        log.info("nurec_ops.swap: %s", self)

    def restore(self):
        for name, (had_own, value) in self._originals.items():
            if had_own:
                setattr(self.target, name, value)
            else:  # it came from the class: remove the instance attribute we added
                delattr(self.target, name)
        self._originals.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()
        return False

    def __repr__(self):
        return f"nurec_ops.swap({_describe(self.target)}): swapped {', '.join(self.swapped) or 'nothing'}"


def _own_attribute(target, name):
    d = getattr(target, "__dict__", None)
    if d is not None and name in d:
        return True, d[name]
    if inspect.ismodule(target):
        return True, getattr(target, name)
    # inherited by a class, or provided to an object by its class: restore by
    # removing what the swap added, so that the lookup finds the original again
    return False, None


def _describe(target):
    if inspect.ismodule(target):
        return f"module {target.__name__}"
    if inspect.isclass(target):
        return f"class {target.__qualname__}"
    return f"{type(target).__qualname__} object"


def _signature(fn):
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(unknown)"


def swap(target, names=None):
    """Replaces the reference ops found in `target` (a module, a class or an
    object) by the fused ops of nurec_ops; returns a :class:`Swap` that is
    also a context manager restoring the originals on exit.

    `names` restricts the swap to those ops (each must be present). A
    function whose signature differs from the reference's is refused with a
    TypeError before anything is changed."""
    return Swap(target, names)
