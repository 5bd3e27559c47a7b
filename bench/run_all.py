"""Run every benchmark in this folder (each prints its own table)."""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    names = sorted(
        f for f in os.listdir(HERE) if f.endswith(".py") and f not in ("run_all.py", "common.py")
    )
    only = sys.argv[1:]
    failed = 0
    for f in names:
        if only and f[:-3] not in only:
            continue
        print(f"\n=== {f} ===", flush=True)
        failed += subprocess.call([sys.executable, os.path.join(HERE, f)]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
