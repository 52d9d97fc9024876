"""What `portcheck smoke` costs per case: a batch of small cases in one run, against one run
per case (what every case cost when each started its own workers).

    python bench/smoke.py                 # or: --runs 3 --device tpu

Both ways run the same six cases of the repository (tests/smoke/cases, examples/smoke) on
the CPU reference and the emulated target, so torch's start-up is most of what is measured.
Prints medians; nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = (
    *(f"tests/smoke/cases/models.py:{name}" for name in ("mlp", "cnn", "transformer_block", "noisy")),
    *(f"examples/smoke/models.py:{name}" for name in ("classifier", "token_filter")),
)


def seconds(specs: tuple[str, ...], device: str) -> float:
    """Wall time of one `portcheck smoke` run of `specs`."""
    command = [sys.executable, "-m", "portcheck", "smoke", *specs, "--device", device, "--format", "json"]
    started = time.perf_counter()
    subprocess.run([*command, *(["--emulate"] if device in ("tpu", "neuron") else [])], cwd=ROOT, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each way; the table shows medians")
    parser.add_argument("--device", default="tpu", help="the device under test (tpu and neuron are emulated)")
    options = parser.parse_args()
    batch = statistics.median(seconds(CASES, options.device) for _ in range(options.runs))
    apart = statistics.median(sum(seconds((spec,), options.device) for spec in CASES) for _ in range(options.runs))
    count = len(CASES)
    print(f"{count} cases on cpu and {options.device}; medians of {options.runs} runs.\n")
    print("| way | wall s | s per case |\n| --- | ---: | ---: |")
    print(f"| one run of {count} cases | {batch:.2f} | {batch / count:.2f} |")
    print(f"| {count} runs of one case | {apart:.2f} | {apart / count:.2f} |")
    print(f"\nOne run / separate runs: {batch / apart:.1%} of the time.")


if __name__ == "__main__":
    main()
