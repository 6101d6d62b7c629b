"""Where a test run's time went, from the files that NUREC_TEST_TIMES
(tests/conftest.py) writes: one line per finished test, "seconds<TAB>
outcome<TAB>node id", appended as each finishes, so the GPU shards that
gpu_tests.sh stops at its time limit still say what they ran and for how
long. Prints the tests run and their seconds, then the costliest test
functions (a function's parametrisations summed: what to trim when the
suite outgrows one device call) and the slowest single tests.

    python3 benchmarks/device/test_times.py $OUT/gpu_times_*.tsv [--top 15]
"""
import argparse
import collections


def read(paths):
    """[(seconds, outcome, node id)] of every well-formed line of the files."""
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 3:
                    continue
                try:
                    rows.append((float(parts[0]), parts[1], parts[2]))
                except ValueError:
                    continue
    return rows


def function_of(nodeid):
    """A test's function: its node id without the parametrisation."""
    return nodeid.split("[", 1)[0]


def by_function(rows):
    """[(function, tests, seconds)], costliest first."""
    tot = collections.defaultdict(lambda: [0, 0.0])
    for sec, _, nid in rows:
        t = tot[function_of(nid)]
        t[0] += 1
        t[1] += sec
    return sorted(((f, n, s) for f, (n, s) in tot.items()), key=lambda r: -r[2])


def summary(rows, top=15):
    """The report's lines."""
    outcomes = collections.Counter(o for _, o, _ in rows)
    functions = by_function(rows)
    lines = [f"{len(rows)} tests in {sum(r[0] for r in rows):.1f} s of test time ("
             + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) + ")",
             f"costliest test functions (of {len(functions)}):"]
    lines += [f"  {s:8.1f} s  {n:5d} tests  {f}" for f, n, s in functions[:top]]
    lines.append("slowest tests:")
    lines += [f"  {s:8.1f} s  {o:7s} {nid}" for s, o, nid in sorted(rows, key=lambda r: -r[0])[:top]]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    print("\n".join(summary(read(a.files), a.top)))


if __name__ == "__main__":
    main()
