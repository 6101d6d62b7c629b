"""``python -m nurec_ops.diagnose [options] script.py [args...]``: runs a
training script under a diagnosis, without editing it.

A step ends at each ``step()`` of the first optimizer that steps (a script
with one optimizer per parameter group still gets one step per iteration). A
script without an optimizer is one step as a whole when ``--warmup 0``.
"""
import argparse
import json
import os
import runpy
import sys

from torch.optim.optimizer import register_optimizer_step_post_hook

from .session import Diagnosis


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m nurec_ops.diagnose",
        description="Profile a training script's steps: host syncs, tiny kernels, GPU idle time.")
    p.add_argument("--warmup", type=int, default=1, help="optimizer steps to skip first (default 1)")
    p.add_argument("--steps", type=int, default=None, help="steps to record (default: all)")
    p.add_argument("--trace", default="nurec_ops_trace.json", help="Chrome trace to write (default %(default)s)")
    p.add_argument("--no-trace", action="store_true", help="keep no trace file")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p


def main(argv=None) -> int:
    opts = _parser().parse_args(argv)
    script = os.path.abspath(opts.script)
    sys.argv = [opts.script] + opts.args
    sys.path.insert(0, os.path.dirname(script))  # as `python script.py` would
    diagnosis = Diagnosis(steps=opts.steps, warmup=opts.warmup, trace=None if opts.no_trace else opts.trace)
    stepper = []

    def end_of_step(optimizer, args, kwargs):
        if not stepper:
            stepper.append(optimizer)
        if optimizer is stepper[0]:
            diagnosis.step()

    hook = register_optimizer_step_post_hook(end_of_step)
    code = 0
    try:
        with diagnosis:
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:  # the script's own exit still gets a report
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        hook.remove()
    if not stepper and opts.warmup > 0:
        print("nurec_ops.diagnose: the script never called optimizer.step(); "
              "use --warmup 0 to profile the whole run as one step", file=sys.stderr)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(diagnosis.figures, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
