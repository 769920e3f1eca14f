"""How long the IMDB workloads take to find, tokenise and encode the real aclImdb tree
(50,000 reviews), the first time and from the encoded-text cache, and the memory it needs.

Each measurement is a fresh `python` process (imports included, as a user's first command
has them) locating the data as a run's parent does (`Workload.locate_real`: encode and fill
the cache), then as `trainscale recipes` does (count the files only). The cache is a new
temporary folder, so the first pass really encodes. Peak memory is the process's maximum
resident set size (`getrusage`).

    python benchmarks/imdb_loader.py --data-dir ../shared/datasets/imdb [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ONE_PASS = """
import json, resource, sys, time
from pathlib import Path
started = time.perf_counter()
from trainscale.data.tensors import DataRequest
from trainscale.workloads import get_workload
imported = time.perf_counter()
request = DataRequest(data_dir=Path(sys.argv[1]), download=False, prepare=sys.argv[2] == "1")
located = get_workload("imdb-bilstm").locate_real(request)
done = time.perf_counter()
print(json.dumps({
    "import_s": imported - started,
    "locate_s": done - imported,
    "num_train": located.size.num_train,
    "num_test": located.size.num_test,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def one_pass(data_dir: Path, cache: Path, prepare: bool) -> dict[str, float]:
    """One fresh process's timings (seconds) and peak memory (MiB)."""
    env = {**os.environ, "TRAINSCALE_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-c", ONE_PASS, str(data_dir), "1" if prepare else "0"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="holds aclImdb/")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="imdb-loader-") as temp:
        cache = Path(temp)
        results = {
            "first run (encode, fill the cache)": one_pass(args.data_dir, cache, True),
            "second run (from the cache)": one_pass(args.data_dir, cache, True),
            "recipes' check (count the files)": one_pass(args.data_dir, cache, False),
        }
        cached = sum(f.stat().st_size for f in cache.rglob("*.npz")) / 2**20
    for name, result in results.items():
        print(
            f"{name:38s} locate {result['locate_s']:6.2f} s  (imports {result['import_s']:.2f} s)"
            f"  peak RSS {result['peak_rss_mib']:6.0f} MiB  "
            f"{result['num_train']:.0f}/{result['num_test']:.0f} reviews"
        )
    print(f"cache entry: {cached:.0f} MiB")
    if args.json:
        args.json.write_text(json.dumps({"passes": results, "cache_mib": cached}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
