"""The camera walks' alpha in completed squares (tiles/splat_math_generic.h:
splat_stage_ldl, splat_alpha_ldl, splat_alpha_vjp_ldl). Only the CUDA walks
call them, so the GPU tests judge them through the rasterizer; here their
algebra is checked on any machine: tests/c/splat_alpha_ldl.c, built with
the host's C compiler against csrc/, evaluates them in float64 and float32
on random float32 records and pixels and compares them with the plain form
(o exp(-sigma) and its VJP) in long double: float64 within 1e-13 (alpha)
and 1e-10 of the gradient's scale, float32 within 1e-5 and 1e-3 (seen:
5e-15, 1e-13, 3e-6, 6e-5 over 2 M pairs; the plain float32 form's own:
1e-3 and 3e-2), no 1/255 decision flipped in float64 and at most one in
10,000 in float32. Also the VJP of a column of 4 pixels (the camera
backward's thread: splat_alpha_vjp_ldl_column, _column_sums) against the
plain per-pixel gradients summed: within 1e-10 (float64) and 1e-3 (float32)
of the column's scale (seen: 2e-13, 6e-5, as the single pixel's)."""
import os
import shutil
import subprocess
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def c_compiler():
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) or shutil.which("cc") or shutil.which("gcc")


def test_ldl_alpha_and_vjp_match_the_plain_forms(tmp_path, seed):
    cc = c_compiler()
    if cc is None:
        pytest.skip("no C compiler")
    exe = str(tmp_path / "splat_alpha_ldl")
    subprocess.run([cc, "-std=c99", "-O2", "-I", os.path.join(ROOT, "csrc"),
                    os.path.join(ROOT, "tests", "c", "splat_alpha_ldl.c"), "-lm", "-o", exe], check=True)
    r = subprocess.run([exe, str(seed), "300000"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
