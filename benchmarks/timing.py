"""Timing helpers shared by the benchmarks (CUDA; step_ms also times a CPU
run).

What each figure means:
- device time: the sum of a call's kernel (and memset) durations from
  torch.profiler, median over calls; free of launch and event overhead.
- back to back: mean time per call of many calls between two CUDA events.
- host time: CPU wall time per call when calls are queued without waiting.
- event median: median of single calls each between two CUDA events (carries
  ~25 us of event and launch overhead on the H200: only for large calls).
- step time: median of a loop's steps, each the time between its start and
  the next step's (CUDA events, no sync in the loop, as a training loop runs).
"""
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile


def event_median_ms(fn, warmup=5, iters=30):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def step_ms(step, steps, warmup=3, cuda=True):
    """Median ms of a step as a training loop runs it: on CUDA, events
    recorded between consecutive step starts with no sync in the loop (a
    step's host work overlaps the device work before it); on the CPU
    (cuda=False), the wall clock around each step."""
    for _ in range(warmup):
        step()
    if not cuda:
        t = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            t.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(t)
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    ev[0].record()
    for k in range(steps):
        step()
        ev[k + 1].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(ev, ev[1:]))


def back_to_back_us(fn, calls=100, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    b.synchronize()
    return 1e3 * a.elapsed_time(b) / calls


def interleaved_ms(fns, rounds=5, calls=10, warmup=3):
    """Median over `rounds` rounds of each of `fns`' back-to-back mean in ms,
    the functions interleaved round by round (after `warmup` calls of each),
    so that clocks and caches drift alike for all of them."""
    for _ in range(warmup):
        for f in fns:
            f()
    torch.cuda.synchronize()
    t = [[] for _ in fns]
    for _ in range(rounds):
        for i, f in enumerate(fns):
            t[i].append(back_to_back_us(f, calls=calls, warmup=2) / 1e3)
    return [statistics.median(v) for v in t]


def host_us(fn, calls=100, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    return host


def _is_device_activity(e):
    name = getattr(e, "device_type", None)
    return name is not None and "CUDA" in str(name) and e.device_time > 0


def _device_events(fn, calls, warmup, activities=(ProfilerActivity.CUDA,)):
    """(start, end, name) in us of every kernel, memset and copy of `calls`
    calls of fn after `warmup` (torch.profiler, one call at a time), by start."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=list(activities)) as prof:
        for _ in range(calls):
            fn()
            torch.cuda.synchronize()
    return sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events() if _is_device_activity(e))


def kernel_profile(fn, calls=20, warmup=5):
    """Per call, from torch.profiler, one call at a time: (median span in us
    from the first kernel's start to the last one's end, median sum of the
    kernel and memset durations in us, kernel launches, memsets, kernel
    names). The span counts overlapping kernels once and includes the gaps
    between kernels (host-bound code); the sum counts only device work."""
    kernels = _device_events(fn, calls, warmup, (ProfilerActivity.CPU, ProfilerActivity.CUDA))
    per_call = len(kernels) // calls
    spans, sums = [], []
    for c in range(calls):
        chunk = kernels[c * per_call:(c + 1) * per_call]
        spans.append(max(e for _, e, _ in chunk) - min(s for s, _, _ in chunk) if chunk else 0.0)
        sums.append(sum(e - s for s, e, _ in chunk))
    memsets = sum(1 for k in kernels if "memset" in k[2].lower()) // calls
    names = sorted({k[2] for k in kernels})
    return statistics.median(spans), statistics.median(sums), per_call - memsets, memsets, names


def _durations_by_name(fn, calls, warmup):
    """Durations in us of every kernel / memset / copy of `calls` calls of fn,
    by name (torch.profiler, one call at a time)."""
    per_name = {}
    for start, end, name in _device_events(fn, calls, warmup):
        per_name.setdefault(name, []).append(end - start)
    return per_name


def kernel_durations(fn, calls=20, warmup=5):
    """Median duration in us of each kernel name over `calls` calls."""
    return {name: statistics.median(d) for name, d in _durations_by_name(fn, calls, warmup).items()}


def kernel_totals(fn, calls=20, warmup=5):
    """Device time in us per call of fn of each kernel name, all its launches
    in the call summed (a radix sort's passes, a kernel launched per phase):
    what a stage costs, where kernel_durations gives one launch's median."""
    return {name: sum(d) / calls for name, d in _durations_by_name(fn, calls, warmup).items()}


def kernel_breakdown(fn, calls=10, warmup=3, top=15):
    """Per kernel name: launches per call of fn, median duration (us) and
    total device time per call (us), largest total first: where a pipeline's
    time goes (e.g. how many radix passes a sort ran and what each cost)."""
    per_name = _durations_by_name(fn, calls, warmup)
    rows = [(name[:60], len(d) / calls, statistics.median(d), sum(d) / calls) for name, d in per_name.items()]
    rows.sort(key=lambda r: -r[3])
    return [(n, f"{k:g}", f"{m:.1f}", f"{t:.1f}") for n, k, m, t in rows[:top]]


def copy_bandwidth_gbs(nbytes, iters=50):
    """Device-to-device copy of nbytes (read + write counted), GB/s."""
    n = max(1, nbytes // 4)
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = event_median_ms(lambda: dst.copy_(src), warmup=10, iters=iters)
    return 2 * n * 4 / (ms * 1e-3) / 1e9, ms * 1e3


def copy_time_us(nbytes):
    """Device time of copying nbytes (nbytes/2 read, nbytes/2 written), from
    the profiler, for comparison with a kernel moving nbytes in total."""
    n = max(1, nbytes // 8)
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    return kernel_profile(lambda: dst.copy_(src), calls=30)[0]


def host_profile(fn, calls=20, warmup=5, top=15):
    """torch.profiler table of where the host time of fn goes."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top)


def autograd_step(render, leaves, cotangents, backward):
    """A benchmark step: render() (outputs from the dict `leaves`), then if
    `backward` its backward with fixed cotangents, the leaves' grads dropped."""
    def step():
        out = render()
        if backward:
            torch.autograd.backward(out, cotangents)
            for v in leaves.values():
                v.grad = None
        return out
    return step


def table(rows, headers):
    widths = [max([len(str(h))] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]
    line = " | ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    out = [line, "-+-".join("-" * w for w in widths)]
    for r in rows:
        out.append(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return "\n".join(out)


def stage_split(fn, stages, calls=10):
    """Median device time per call of each named stage (ms): `stages` is a
    list of (stage, kernel-name substrings); unmatched kernels are 'other'.
    Also returns kernel launches and memsets per call."""
    ev = _device_events(fn, calls, warmup=1)
    per = len(ev) // calls
    split = {name: [] for name, _ in stages}
    split["other"] = []
    memsets = sum(1 for e in ev if "memset" in e[2].lower()) // calls
    for c in range(calls):
        acc = {k: 0.0 for k in split}
        for s, e, name in ev[c * per:(c + 1) * per]:
            for stage, keys in stages:
                if any(k in name for k in keys):
                    acc[stage] += e - s
                    break
            else:
                acc["other"] += e - s
        for k in acc:
            split[k].append(acc[k])
    return {k: statistics.median(v) / 1e3 for k, v in split.items()}, per - memsets, memsets


def graph_ms(step, iters):
    """Median ms of replaying `step` captured in a CUDA graph (warmed up on a
    side stream first, as torch's graph docs prescribe)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    return event_median_ms(g.replay, warmup=3, iters=iters)


def host_syncs(step):
    """0 if `step` runs without a host sync, else '>=1' (it stops at the
    first one: set_sync_debug_mode('error'))."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
        n = 0
    except RuntimeError:
        n = ">=1"
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return n
