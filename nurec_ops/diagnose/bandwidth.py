"""Achieved bandwidth of our ops: bytes moved (estimated from the recorded
shapes) and the device's copy bandwidth to compare with.

Our ops are memory bound, so "what fraction of a plain device copy does this op
reach" is the honest yardstick. The bytes are an estimate: every input and
output read or written once (numel x itemsize); output shapes come from running
the op's fake kernel on meta tensors built from the recorded input shapes.
"""
import ast
import functools
import json
import time
from typing import Optional

import torch

# Kineto's "Input type" strings (c10 type names) for the dtypes we can size.
_DTYPES = {
    "float": torch.float32, "double": torch.float64, "c10::Half": torch.float16,
    "c10::BFloat16": torch.bfloat16, "long int": torch.int64, "int": torch.int32,
    "short int": torch.int16, "signed char": torch.int8, "unsigned char": torch.uint8,
    "bool": torch.bool,
}


@functools.lru_cache(maxsize=None)
def copy_bandwidth_gbps(device: str) -> float:
    """Device-to-same-device copy bandwidth in GB/s (read + write bytes over
    time), measured once per device per process. Synchronizes ``device``: call
    it outside the profiled steps and with sync debugging off."""
    dev = torch.device(device)
    if dev.type == "cuda":
        n = 64 * 2**20  # 256 MiB of float32: far past the H200's 60 MiB L2
        src = torch.empty(n, device=dev)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        reps = 20
        start.record()
        for _ in range(reps):
            dst.copy_(src)
        stop.record()
        stop.synchronize()
        seconds = start.elapsed_time(stop) / 1e3 / reps
    else:
        n = 16 * 2**20  # 64 MiB: past the last-level cache of most hosts
        src = torch.ones(n, device=dev)
        dst = torch.empty_like(src)
        dst.copy_(src)
        seconds = float("inf")
        for _ in range(5):  # best of 5: the machine may be busy
            t0 = time.perf_counter()
            dst.copy_(src)
            seconds = min(seconds, time.perf_counter() - t0)
    return 2 * n * src.element_size() / seconds / 1e9


def _tensor_bytes(dims, type_name) -> Optional[int]:
    dtype = _DTYPES.get(type_name)
    if dtype is None or not isinstance(dims, list) or any(not isinstance(d, int) for d in dims):
        return None
    numel = 1
    for d in dims:
        numel *= d
    return numel * torch.empty((), dtype=dtype).element_size()


def _parse_scalar(text: str, type_name: str):
    if type_name.startswith("Optional[") and type_name.endswith("]"):
        type_name = type_name[len("Optional["):-1]
    if type_name in ("int", "SymInt"):
        return int(text)
    if type_name == "float":
        return float(text)
    if type_name == "bool":
        return text == "True"
    if type_name.startswith("List[") or type_name.endswith("[]"):
        return ast.literal_eval(text)
    return text


def _overload_for(op_name: str, n_args: int):
    namespace, _, name = op_name.partition("::")
    packet = getattr(getattr(torch.ops, namespace), name.split(".")[0], None)
    if packet is None:
        return None
    for overload in packet.overloads():
        op = getattr(packet, overload)
        if n_args is None or len(op._schema.arguments) == n_args:
            return op
    return None


def _forward_default(op_name: str, arg_name: str):
    """The profiler records no strings. A backward op's mode-like argument
    rarely has a default, but its forward op's argument of the same name often
    does, and shapes do not depend on it."""
    if not op_name.endswith("_backward"):
        return None
    forward = _overload_for(op_name[: -len("_backward")], None)
    if forward is None:
        return None
    for arg in forward._schema.arguments:
        if arg.name == arg_name and arg.has_default_value():
            return arg.default_value
    return None


def estimate_bytes(op_name: str, args: dict) -> Optional[int]:
    """Bytes read and written by one call of ``op_name`` (a dispatcher name
    like ``nurec_ops::collect``) from the args of its profiler event, or None
    when the shapes or types are not all known."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if dims is None or types is None:
        return None
    concrete = args.get("Concrete Inputs") or [""] * len(dims)
    # A training loop repeats the same calls: size each distinct one once.
    return _estimate(op_name, json.dumps([dims, types, concrete]))


@functools.lru_cache(maxsize=4096)
def _estimate(op_name: str, recorded: str) -> Optional[int]:
    dims, types, concrete = json.loads(recorded)
    op = _overload_for(op_name, len(dims))
    if op is None:
        return None
    total = 0
    call_args = []
    for arg, d, t, c in zip(op._schema.arguments, dims, types, concrete):
        kind = str(arg.type)
        if kind in ("Tensor", "Optional[Tensor]", "Tensor?"):
            if not t:  # an absent optional tensor
                call_args.append(None)
                continue
            nbytes = _tensor_bytes(d, t)
            if nbytes is None:
                return None
            total += nbytes
            call_args.append(torch.empty(d, dtype=_DTYPES[t], device="meta"))
        elif c:
            try:
                call_args.append(_parse_scalar(c, kind))
            except (ValueError, SyntaxError):
                return None
        elif arg.has_default_value():
            call_args.append(arg.default_value)  # e.g. strings, which are not recorded
        else:
            default = _forward_default(op_name, arg.name)
            if default is None:
                return None
            call_args.append(default)
    try:
        outputs = op(*call_args)
    except Exception:  # no fake kernel, or one that needs real data
        return None
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for out in outputs:
        if isinstance(out, torch.Tensor):
            total += out.numel() * out.element_size()
    return total
