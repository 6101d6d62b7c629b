"""Build of nurec_ops: C CPU kernels always, CUDA kernels when nvcc is there.

Environment:
  NUREC_OPS_CUDA=0/1      force the CUDA kernels off / on (default: on when
                          nvcc is found and torch is a CUDA build)
  TORCH_CUDA_ARCH_LIST    CUDA targets (default here: "9.0+PTX", Hopper
                          machine code plus PTX for newer chips)
  MAX_JOBS                parallel compile jobs (read by torch's ninja build)
  NUREC_OPS_PTXAS_VERBOSE=1  print each kernel's registers, shared memory and
                          spills (ptxas -v)

The extension uses only PyTorch's stable ABI, targeting torch 2.11, and no
Python C API: one build loads on torch >= 2.11 and on any Python >= 3.9, and
is loaded with torch.ops.load_library (see nurec_ops/_library.py).
"""
import glob
import os

from setuptools import find_packages, setup

# torch derives CUDA_HOME from the nvcc on PATH; where that nvcc is a wrapper
# script (as on our machines) the derived root has no lib64. Prefer the
# toolkit's own root when the user has not named one.
if not os.environ.get("CUDA_HOME") and os.path.exists("/usr/local/cuda/bin/nvcc"):
    os.environ["CUDA_HOME"] = "/usr/local/cuda"

from torch.utils import cpp_extension  # noqa: E402  (reads CUDA_HOME on import)

ROOT = os.path.dirname(os.path.abspath(__file__))
TORCH_TARGET = "0x020b000000000000"  # torch 2.11: the oldest runtime we load on


def want_cuda():
    flag = os.environ.get("NUREC_OPS_CUDA")
    found = cpp_extension.CUDA_HOME is not None and _torch_has_cuda()
    if flag == "0":
        return False
    if flag == "1":
        if not found:
            raise RuntimeError("NUREC_OPS_CUDA=1 but no nvcc (CUDA_HOME) or a CPU-only torch")
        return True
    return found


def _torch_has_cuda():
    import torch

    return torch.version.cuda is not None


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "csrc", pattern)))


def extension():
    cuda = want_cuda()
    c_sources = sources("*/*.c")
    cu_sources = sources("*/*.cu") if cuda else []
    common = ["-O3", f"-DTORCH_TARGET_VERSION={TORCH_TARGET}"]
    # extra C/C++ flags (e.g. the same tuning macros as NUREC_OPS_NVCC_FLAGS
    # when the host code must agree with the kernels, like a tile shape)
    cxx = common + ["-std=c++17", "-fvisibility=hidden"] + os.environ.get("NUREC_OPS_CFLAGS", "").split()
    args = {"cxx": cxx}
    kind = cpp_extension.CppExtension
    if cuda:
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0+PTX")
        args["cxx"] = cxx + ["-DNUREC_WITH_CUDA", "-DUSE_CUDA"]
        args["nvcc"] = common + ["-std=c++17", "-lineinfo",
                                 "-Xptxas=-warn-spills", "-DNUREC_WITH_CUDA"]
        if os.environ.get("NUREC_OPS_PTXAS_VERBOSE") == "1":
            args["nvcc"].append("-Xptxas=-v")  # registers, shared memory, spills
        # extra nvcc flags, e.g. kernel tuning macros for a benchmark variant:
        # NUREC_OPS_NVCC_FLAGS="-DRL_BWD_MIN_BLOCKS_F32=8"
        args["nvcc"] += os.environ.get("NUREC_OPS_NVCC_FLAGS", "").split()
        kind = cpp_extension.CUDAExtension
    return kind(
        name="nurec_ops._C",
        sources=["csrc/register.cpp"] + sources("*/*_register.cpp") + c_sources + cu_sources,
        include_dirs=[os.path.join(ROOT, "csrc")],
        extra_compile_args=args,
        py_limited_api=True,
    )


setup(
    name="nurec_ops",
    packages=find_packages(include=["nurec_ops", "nurec_ops.*"]),
    ext_modules=[extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
)
