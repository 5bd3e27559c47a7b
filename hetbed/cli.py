"""The ``hetbed`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hetbed", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("devices", help="list the real devices of this process")
    demo = sub.add_parser("demo", help="run the headline study and write its report")
    demo.add_argument("--out", default="out/demo")
    args = parser.parse_args(argv)
    if args.cmd == "devices":
        import hetbed as hb

        with hb.Session() as sess:
            for d in sess.list_devices():
                print(d.name, d.device_type, d.memory_limit_bytes)
        return 0
    if args.cmd == "demo":
        from hetbed.demo import run_demo

        return run_demo(args.out)
    return 2


if __name__ == "__main__":
    sys.exit(main())
