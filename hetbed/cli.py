"""The ``hetbed`` command line: ``hetbed devices``, ``catalog``, ``calibrate``, ``demo``.

Exit codes: 0 ok, 2 bad input, 1 failure.
"""

from __future__ import annotations

import argparse
import json
import sys


def _devices(args: argparse.Namespace) -> int:
    import hetbed as hb

    rows = [d.describe() for d in hb.list_devices()]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            mem = r.get("memory_limit_bytes") or 0
            print(f"{r['name']:48s} {r['device_type']:5s} {mem / 2**30:8.1f} GiB")
    return 0


def _catalog(args: argparse.Namespace) -> int:
    from hetbed.devices import catalog

    if args.name:
        try:
            spec = catalog.load_device(args.name)
        except Exception:  # noqa: BLE001 - not a device: try the links
            try:
                spec = catalog.load_link(args.name)
            except Exception:  # noqa: BLE001
                print(
                    f"hetbed catalog: no device or link named {args.name!r}; devices: "
                    f"{', '.join(catalog.list_devices())}; links: {', '.join(catalog.list_links())}",
                    file=sys.stderr,
                )
                return 2
        fields = {k: v for k, v in vars(spec).items() if k not in ("sources", "notes")}
        if args.json:
            print(json.dumps({"spec": fields, "sources": spec.sources}, indent=1, default=str))
        else:
            for k, v in fields.items():
                src = spec.sources.get(k)
                print(f"{k:32s} {v!s:40s} {('[' + src + ']') if src else ''}")
        return 0
    devs = [catalog.load_device(k) for k in catalog.list_devices()]
    links = [catalog.load_link(k) for k in catalog.list_links()]
    if args.json:
        print(json.dumps({"devices": [d.key for d in devs], "links": [x.key for x in links]}))
        return 0
    print("devices:")
    for d in devs:
        peak = d.peak_flops.get("float32", 0.0)
        print(
            f"  {d.key:22s} {d.kind:4s} {peak / 1e12:8.2f} TFLOP/s fp32 "
            f"{d.memory_bandwidth_bytes_per_s / 1e9:8.1f} GB/s  {d.name}"
        )
    print("links:")
    for x in links:
        print(
            f"  {x.key:22s} {x.bandwidth_bytes_per_s / 1e9:8.2f} GB/s {x.latency_s * 1e6:8.2f} us  {x.name}"
        )
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from hetbed.scenarios.models.small import BUILDERS
    from hetbed.simulator.calibrate import calibrate

    progress = (lambda m: None) if args.quiet else print
    perf, prof = calibrate(args.out, BUILDERS, args.repeats, progress)
    if args.json:
        print(
            json.dumps(
                {
                    "peak_float32_flops": perf.peak_flops["float32"],
                    "memory_bandwidth": perf.memory_bandwidth,
                    "dispatch_overhead_s": perf.launch_overhead_s,
                    "profile_entries": len(prof.table),
                    "out": args.out,
                }
            )
        )
    elif not args.quiet:
        print(
            f"use it: HETBED_CATALOG_PATH={args.out} (device 'this_machine'), "
            f"Profiled.load('{args.out}/profile.json')"
        )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from hetbed.demo import run_demo

    return run_demo(args.out, quiet=args.quiet)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hetbed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("devices", help="list the real devices of this process")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_devices)
    p = sub.add_parser("catalog", help="list simulated hardware (or show one entry with sources)")
    p.add_argument("name", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_catalog)
    p = sub.add_parser("calibrate", help="measure this machine and profile ops for the cost model")
    p.add_argument("--out", default="out/calibration")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_calibrate)
    p = sub.add_parser("demo", help="run the headline study and write its report")
    p.add_argument("--out", default="out/demo")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=_demo)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        return 1
    except (ValueError, TypeError, KeyError) as e:
        print(f"hetbed {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
