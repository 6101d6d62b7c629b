"""Replays a registry row's float32 parity for given seeds (as
test_parity, or test_parity_lists_cut_into_parts with --segments S
--segment-min M) and says where its gradients leave the bound: each
gradient's bad rows, and the rows near_cuts.rows_near_cuts frees (the
Gaussians of pixels next to a cut), so that a failure is seen to be a
flip or not. Not a test: a tool for a failing test's reported seed.

    python3 tests/replay_parity.py ROW SEED [SEED ...] [--device cuda] [--segments 4 --segment-min 3]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytest  # noqa: E402
import torch  # noqa: E402

import test_op_registry as T  # noqa: E402
from near_cuts import rows_near_cuts  # noqa: E402
from tolerances import GRAD_ORDER_FLOOR, reference_bound  # noqa: E402
from op_cases import CASES  # noqa: E402

F32, F64 = torch.float32, torch.float64


def bad_rows(a, e, r):
    """Elements past the rule's bound for gradients (tolerances.assert_close_to_reference, its floor), by row."""
    a, e, r = (t.detach().cpu().double() for t in (a, e, r))
    bound, scale, _ = reference_bound(e, r, GRAD_ORDER_FLOOR)
    bad = (a - e).abs() > bound
    rows = torch.nonzero(bad.reshape(bad.shape[0], -1).any(-1)).flatten().tolist() if bad.dim() else []
    return int(bad.sum()), rows, (a - e).abs().max().item() / scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("row")
    ap.add_argument("seeds", type=int, nargs="+")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--segments", type=int, default=None, help="cut lists as test_parity_lists_cut_into_parts")
    ap.add_argument("--segment-min", type=int, default=1)
    a = ap.parse_args()
    case = next(c for c in CASES if c.name == a.row)
    for seed in a.seeds:
        mp = pytest.MonkeyPatch()
        torch.manual_seed(seed)
        s = case.inputs(a.device, F32, seed)
        if a.segments is not None:  # the test's draw: again where every list is short
            T.cut_into_parts(mp, case, a.segments, a.segment_min)
            for k in range(5):
                s = case.inputs(a.device, F32, seed + k)
                if T.longest_list(case, s) > a.segment_min:
                    break
        r64 = T.on_cpu(s, F64)
        out = list(case.op(**s))
        cots = T.cotangents(out, seed)
        grads = T.grads_of(case, out, s, cots)
        _, eg = T.forward_backward(case, case.reference, r64, cots)
        _, rg = T.forward_backward(case, case.reference, T.on_cpu(s, F32), cots)
        near_g, near_c = rows_near_cuts(lambda: case.reference(**r64))
        print(f"seed {seed}: rows next to a cut: Gaussians {sorted(near_g)}, cameras {sorted(near_c)}")
        for k, g in grads.items():
            if g is None:
                continue
            n, rows, rel = bad_rows(g, eg[k], rg[k])
            if n:
                free = near_c if k in T.PER_CAMERA_GRADS else near_g
                outside = [r for r in rows if r not in free]
                print(f"  grad {k}: {n} elements past the bound in rows {rows} (max {rel:.3g} of the scale); "
                      f"outside the freed rows: {outside or 'none'}")
        mp.undo()


if __name__ == "__main__":
    main()
