"""The compact text report printed when a diagnosis ends."""
import statistics
from typing import List


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def _num(v) -> str:
    if float(v).is_integer():
        return str(int(v))
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def _per_step(values) -> str:
    """'12' when every step agrees, else 'median 12 (min 10, max 30)'."""
    if not values:
        return "-"
    lo, hi, mid = min(values), max(values), statistics.median(values)
    return _num(lo) if lo == hi else f"median {_num(mid)} (min {_num(lo)}, max {_num(hi)})"


def _bytes(n) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def format_report(f: dict) -> str:
    lines: List[str] = [f"nurec_ops.diagnose: {f['steps']} step(s) on {f['device']}"]
    if not f["steps"]:
        lines.append("  no step was recorded (call d.step() after each step; steps before `warmup` are skipped)")
        return "\n".join(lines)
    add = lines.append
    add(f"  step time (ms)          {_per_step(f['step_ms'])}")
    add(f"  host syncs / step       {_per_step(f['syncs_per_step'])}")
    for s in f["sync_sites"][:8]:
        op = f"  [{s['op']}]" if s["op"] else ""
        add(f"    {s['count']:>5}x {s['where']}  {_short(s['code'], 50)}{op}")
    add(f"  torch ops / step        {_per_step(f['ops_per_step'])}")
    if f["top_ops"]:
        add("    most called (all steps): " + ", ".join(f"{_short(o['name'], 40)} {o['calls']}" for o in f["top_ops"]))
    if f["kernels_per_step"] is not None:
        add(f"  kernels / step          {_per_step(f['kernels_per_step'])}"
            f"   under 10 us: {_per_step(f['small_kernels_per_step'])}"
            f"   launch calls: {_per_step(f['launch_calls_per_step'])}")
        if f["launches_by_op"]:
            most = ", ".join(f"{_short(o['op'], 40)} {o['kernels']}" for o in f["launches_by_op"])
            add(f"    launched most by: {most}")
        add(f"  GPU busy                {100 * f['gpu_busy']:.1f}% of wall time"
            f"   (per step: {_per_step([round(100 * b, 1) for b in f['gpu_busy_per_step']])} %)")
        for g in f["idle_gaps"]:
            add(f"    idle {g['ms']:8.3f} ms in step {g['step']} at +{g['at_ms']:.3f} ms;"
                f" CPU in: {_short(g['cpu'], 70)}")
        add("  top kernels             calls   total ms    mean us")
        for k in f["top_kernels"]:
            add(f"    {_short(k['name'], 44):<44} {k['calls']:>6} {k['total_ms']:>10.3f} {k['mean_us']:>10.1f}")
    else:
        add("  (no GPU activity recorded: GPU figures omitted)")
    if f["nurec_ops"]:
        add(f"  {'nurec_ops op (device)':<46} {'calls':>5} {'ms':>10} {'bytes':>10} {'GB/s':>8} {'of copy':>8}")
        for o in f["nurec_ops"]:
            gbps = f"{o['gbps']:.1f}" if o["gbps"] is not None else "?"
            frac = f"{100 * o['fraction_of_copy']:.0f}%" if o["fraction_of_copy"] is not None else "?"
            name = o["op"].replace("nurec_ops::", "")
            add(f"    {_short(name, 36) + ' (' + o['device'] + ')':<44} {o['calls']:>5} {o['ms']:>10.3f}"
                f" {_bytes(o['bytes']):>10} {gbps:>8} {frac:>8}  (copy {o['copy_gbps']:.0f} GB/s)")
    if f["peak_memory_mb"] is not None:
        add(f"  peak memory / step (MB) {_per_step(f['peak_memory_mb'])}")
    if f["trace"]:
        add(f"  Chrome trace: {f['trace']}  (chrome://tracing or https://ui.perfetto.dev)")
    return "\n".join(lines)
