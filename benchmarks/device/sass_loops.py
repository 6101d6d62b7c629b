"""The rasterizers' kernels as the GPU runs them, without a GPU: builds a
family's CUDA file for sm_90 (nvcc -cubin, as setup.py compiles it), and
prints per kernel its instructions, registers and spills (ptxas), and the
lengths of its longest loops in SASS (a backward branch's span). A change
that moves a walk's innermost loop by a few instructions moves its time by
as much (measured on the H200: the camera backward's steps grew from 337
to 345 instructions, and the 1944 garden's fwd+bwd by 65 us); this finds
such changes in seconds, before a device call.

    python3 benchmarks/device/sass_loops.py [--family rasterize_camera] [--ref 8ed7d7e] [--kernels backward,forward]
        [--variants 'main:|wide:-DRC_BWD_MIN_BLOCKS_F32=12']

--ref builds that git revision's tree beside the working tree's, for a
side-by-side table; --variants 'name:-DMACRO=1|...' builds the working
tree once per set of tuning macros instead (device_variants.sh's format). cuobjdump and the nvdisasm it runs come from PATH, the
CUDA toolkit, or NVIDIA's wheels (pip install nvidia-cuda-cuobjdump
nvidia-cuda-nvdisasm; not dependencies of nurec_ops).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository


def tool(name):
    """A CUDA tool: on PATH, beside nvcc, or in an NVIDIA wheel's bin folder."""
    found = shutil.which(name)
    if found:
        return found
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    beside = os.path.join(os.path.dirname(nvcc), name)
    if os.path.exists(beside):
        return beside
    for site in sys.path:
        for path in glob.glob(os.path.join(site, "nvidia", "cu*", "bin", name)):
            return path
    sys.exit(f"{name} not found: pip install nvidia-cuda-{name} (or put the CUDA toolkit's on PATH)")


def build(tree, family, out_dir, flags=()):
    """(ptxas' report, cuobjdump -sass) of one family's .cu in `tree`,
    compiled with the extra nvcc `flags` (a variant's tuning macros)."""
    src = os.path.join(tree, "csrc", family, family + ".cu")
    cubin = os.path.join(out_dir, family + ".cubin")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    r = subprocess.run([nvcc, "-O3", "-std=c++17", "-arch=sm_90", "-cubin", "-I" + os.path.join(tree, "csrc"),
                        "-DNUREC_WITH_CUDA", "-Xptxas=-v", *flags, src, "-o", cubin], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr)
    # cuobjdump -sass runs nvdisasm, which it looks for on PATH only
    env = dict(os.environ, PATH=os.path.dirname(tool("nvdisasm")) + os.pathsep + os.environ.get("PATH", ""))
    sass = subprocess.run([tool("cuobjdump"), "-sass", cubin], capture_output=True, text=True, check=True,
                          env=env).stdout
    return r.stderr, sass


def by_kernel(text, header):
    """(kernel, line) for each line of `text` after a line that names a
    kernel (`header`, a regex whose group 1 is the name)."""
    cur = None
    for line in text.splitlines():
        m = re.search(header, line)
        if m:
            cur = m.group(1)
            yield cur, None
        elif cur:
            yield cur, line


def ptxas_report(text):
    """kernel -> (registers, spill stores + loads in bytes)."""
    out = {}
    for name, line in by_kernel(text, r"Compiling entry function '(\S+)'"):
        row = out.setdefault(name, [0, 0])
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line or "")
        if m:
            row[1] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line or "")
        if m:
            row[0] = int(m.group(1))
    return out


def sass_kernels(sass):
    """kernel -> [(address, instruction)]."""
    out = {}
    for name, line in by_kernel(sass, r"^\s*Function : (\S+)"):
        ins = out.setdefault(name, [])
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", line or "")
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    return out


def loops(ins, top=4):
    """The longest spans of backward branches, in instructions (16 bytes each)."""
    spans = []
    for addr, text in ins:
        m = re.search(r"BRA\s+0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr:
            spans.append((addr - int(m.group(1), 16)) // 16)
    return sorted(spans, reverse=True)[:top]


def table(tree, family, keep, flags=()):
    with tempfile.TemporaryDirectory() as d:
        report, sass = build(tree, family, d, flags)
    regs = ptxas_report(report)
    rows = {}
    for name, ins in sass_kernels(sass).items():
        if keep and not any(k in name for k in keep):
            continue
        rows[same_name(name)] = (len(ins), *regs.get(name, (0, 0)), loops(ins))
    return rows


def same_name(name):
    """A kernel's name with its anonymous namespace's per-build hash
    (``_GLOBAL__N__<hex>_``, which differs between two trees' builds)
    dropped, so that the builds' rows meet."""
    return re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N__", name)


def shown(name, width=60):
    """The name cut to width from just before its "kernel": the mangled
    namespace before it is alike for all, and the template arguments just
    after it tell a family's kernel variants apart."""
    i = name.find("kernel")
    start = max(0, min(i - 25, len(name) - width)) if i >= 0 else 0
    return name[start:start + width]


def parse_variants(text):
    """{name: (nvcc flags)} of 'name:flags|name:flags' (flags may be empty)."""
    out = {}
    for part in text.split("|"):
        name, _, flags = part.partition(":")
        if not name.strip():
            sys.exit(f"--variants: a variant needs a name, got {part!r}")
        out[name.strip()] = tuple(flags.split())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="rasterize_camera", choices=["rasterize_camera", "rasterize_lidar", "tiles"])
    ap.add_argument("--ref", default=None, help="a git revision to build beside the working tree")
    ap.add_argument("--kernels", default="backward_kernel,forward", help="substrings of the kernels to show")
    ap.add_argument("--variants", default="", help="builds of the working tree with extra nvcc flags, "
                    "'name:-DA=1 -DB=2|name2:...' (as device_variants.sh's VARIANTS), instead of the plain one")
    a = ap.parse_args()
    keep = [k for k in a.kernels.split(",") if k]
    variants = parse_variants(a.variants) if a.variants else {"tree": ()}
    trees = {label: (ROOT, flags) for label, flags in variants.items()}
    tmp = None
    if a.ref:
        tmp = tempfile.mkdtemp()
        archive = subprocess.run(["git", "-C", ROOT, "archive", a.ref, "csrc"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "x", "-C", tmp], input=archive, check=True)
        trees = {a.ref: (tmp, ()), **trees}
    try:
        results = {label: table(path, a.family, keep, flags) for label, (path, flags) in trees.items()}
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    names = sorted(set().union(*results.values()))
    print(f"{'kernel':60} | " + " | ".join(f"{label}: instrs, regs, spill B, loops" for label in results))
    for n in names:
        cells = []
        for label in results:
            r = results[label].get(n)
            cells.append("-" if r is None else f"{r[0]}, {r[1]}, {r[2]}, {r[3]}")
        print(f"{shown(n):60} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
