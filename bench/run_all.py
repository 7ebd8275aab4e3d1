"""`make bench`: every benchmark of the project, one after the other.

The pipeline benchmark (bench_pipeline.py) runs the sizes given by BENCH_SIZES (default
"small,medium"; "large" = 10 M commits and 100 k generations takes long: run it in the
background with `nohup .venv/bin/python bench/bench_pipeline.py --sizes large &`).
Then the decode benchmark (bench_decode.py: `rebalance-audit decode` side by side with
Kafka's DumpLogSegments and `gzip -1` on the same files). The other component benchmarks
(parse-logs, silver's decode, assignors, Dagster against the CLI) run with BENCH_COMPONENTS=1; each
prints its own figures.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    # No options of its own beyond --help: the sizes come from BENCH_SIZES so that `make bench`
    # stays one command; bench_pipeline.py takes the detailed options.
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    sizes = os.environ.get("BENCH_SIZES", "small,medium")
    steps = [["bench_pipeline.py", "--sizes", sizes], ["bench_decode.py"]]
    for extra in ("bench_spark_start.py", "bench_parse_logs.py", "bench_silver_decode.py", "bench_assignors.py",
                  "bench_dagster.py"):
        if (HERE / extra).exists() and os.environ.get("BENCH_COMPONENTS", "0") == "1":
            steps.append([extra])
    failed = 0
    for step in steps:
        print(f"== {' '.join(step)}", flush=True)
        rc = subprocess.call([sys.executable, str(HERE / step[0]), *step[1:]])
        if rc != 0:
            print(f"!! {step[0]} exited {rc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
