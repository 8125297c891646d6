"""Reading a LIBSVM file: ``fedcomp.data.load_libsvm`` against scikit-learn's
``load_svmlight_file`` on the same file, in one process.

    python benchmarks/libsvm_read.py [--samples 50000] [--features 123] [--density 0.11]

The file is A9A-shaped by default (50 000 x 123, 11 % nonzeros), written once to a
temporary directory. Four readers, each timed as the best of three reads (five for the two
sparse ones, timed alternately): scikit-learn's (sparse), ``load_libsvm`` (scikit-learn's
parser where installed, then densified), ``load_libsvm(sparse=True)`` (kept sparse) and
fedcomp's own line-by-line reader (what ``load_libsvm`` uses without scikit-learn, or to
name the line at fault in a malformed file). Prints seconds and ratios, and the load.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def best_of(read: Callable[[], object], times: int = 3) -> float:
    """The fastest of ``times`` calls, in seconds."""
    spent = []
    for _ in range(times):
        tic = time.perf_counter()
        read()
        spent.append(time.perf_counter() - tic)
    return min(spent)


def main(argv: list[str] | None = None) -> int:
    from sklearn.datasets import dump_svmlight_file, load_svmlight_file

    import fedcomp.data._libsvm as real

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--features", type=int, default=123)
    parser.add_argument("--density", type=float, default=0.11)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = (rng.random((args.samples, args.features)) < args.density).astype(np.float64)
    y = np.where(rng.random(args.samples) < 0.24, 1.0, -1.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.svm"
        dump_svmlight_file(X, y, str(path), zero_based=False)
        theirs = best_of(lambda: load_svmlight_file(str(path)))
        ours = best_of(lambda: real.load_libsvm(path))
        kept = best_of(lambda: real.load_libsvm(path, sparse=True), times=5)
        theirs = min(theirs, best_of(lambda: load_svmlight_file(str(path)), times=5))
        fast = real._read_with_scikit_learn
        real._read_with_scikit_learn = lambda *_: None  # the line-by-line reader alone
        try:
            own = best_of(lambda: real.load_libsvm(path), times=1)
        finally:
            real._read_with_scikit_learn = fast
    print(f"{args.samples} x {args.features}, density {args.density}: "
          f"load_svmlight_file {theirs:.3f} s; load_libsvm {ours:.3f} s "
          f"({ours / theirs:.2f}x); load_libsvm(sparse=True) {kept:.3f} s "
          f"({kept / theirs:.2f}x); own reader {own:.3f} s ({own / theirs:.2f}x); "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
