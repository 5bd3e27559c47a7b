"""The ``hetbed`` command line: ``run``, ``sweep``, ``describe``, ``report``, ``devices``,
``catalog``, ``calibrate``, ``demo``, ``cluster``.

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


def _run_file(args: argparse.Namespace, jobs: int, dask: str | None) -> int:
    import os
    import time

    from hetbed.scenarios import report, results, runner, schema

    sc = schema.load(args.file)
    points = schema.expand(sc)
    out = args.out or os.path.join("out", os.path.splitext(os.path.basename(args.file))[0])
    bar = None
    if not args.quiet and not args.json:
        print(schema.describe(sc), file=sys.stderr)
        from tqdm import tqdm

        bar = tqdm(total=len(points), unit="run", file=sys.stderr, mininterval=0.5)

    def progress(done: int, total: int, summary: dict) -> None:
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"{summary['step_time_p50_s']:.3g} s/step")

    t0 = time.perf_counter()
    res = runner.run_all(points, jobs=jobs, dask_address=dask, progress=progress)
    if bar is not None:
        bar.close()
    paths = results.save(out, sc, res, time.perf_counter() - t0)
    _, summary, steps, manifest = results.load(out)
    paths.update(
        report.write(
            out, sc, summary, steps, manifest, results.load_gradients(out), results.load_curves(out)
        )
    )
    if args.json:
        print(
            json.dumps(
                {"out": out, "report": paths["html"], "summary": summary.to_dict(orient="records")},
                default=str,
            )
        )
    elif not args.quiet:
        cols = [
            c
            for c in (
                "workers",
                "backup_workers",
                "strategy",
                "nic",
                "ps",
                "step_time_p50_s",
                "examples_per_s",
            )
            if c in summary
        ]
        print(summary[cols].to_string(index=False))
        print(f"results: {out}  report: {paths['html']}")
    return 0


def _run(args: argparse.Namespace) -> int:
    return _run_file(args, 1, None)


def _sweep(args: argparse.Namespace) -> int:
    return _run_file(args, args.jobs, args.dask)


def _describe(args: argparse.Namespace) -> int:
    from hetbed.scenarios import schema

    sc = schema.load(args.file)
    if args.json:
        print(json.dumps({k: v for k, v in sc.items() if not k.startswith("_")}, default=str))
    else:
        print(schema.describe(sc))
    return 0


def _report(args: argparse.Namespace) -> int:
    from hetbed.scenarios import report

    paths = report.regenerate(args.results)
    if args.json:
        print(json.dumps(paths))
    elif not args.quiet:
        print(f"report: {paths['html']}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from hetbed.demo import run_demo

    return run_demo(args.out, quiet=args.quiet)


def _cluster(args: argparse.Namespace) -> int:
    from hetbed.runtime.distributed.launcher import launch

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    try:
        return launch(command, args.ps, args.workers, token=args.token, grace_s=args.grace)
    except OSError as e:  # the command could not be started
        print(f"hetbed cluster: cannot start {command!r}: {e}", file=sys.stderr)
        return 2


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
    for name, fn, helptext in (
        ("run", _run, "simulate a scenario file (all its sweep points) and write results + report"),
        ("sweep", _sweep, "like run, with sweep points in parallel processes or on Dask"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("file")
        p.add_argument("--out", default=None, help="results folder (default out/<file stem>)")
        p.add_argument("--quiet", action="store_true")
        p.add_argument("--json", action="store_true")
        if name == "sweep":
            p.add_argument("--jobs", type=int, default=2)
            p.add_argument(
                "--dask",
                default=None,
                metavar="ADDRESS",
                help="run on an existing Dask scheduler instead of local processes",
            )
        p.set_defaults(fn=fn)
    p = sub.add_parser("describe", help="say what a scenario file will simulate")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_describe)
    p = sub.add_parser("report", help="regenerate the report of a results folder")
    p.add_argument("results")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_report)
    p = sub.add_parser("demo", help="run the headline study and write its report")
    p.add_argument("--out", default="out/demo")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=_demo)
    p = sub.add_parser(
        "cluster",
        help="run a command as the PS and worker tasks of a local gRPC cluster",
        description="Start --ps + --workers processes running COMMAND on free loopback ports, "
        "each with HETBED_CONFIG naming the cluster and its task (hb.train.cluster_from_env()); "
        "stop the PS tasks once every worker has exited. Exit 0 when all workers exited 0.",
    )
    p.add_argument("--ps", type=int, default=1, help="number of PS tasks (default 1)")
    p.add_argument("--workers", type=int, default=1, help="number of worker tasks (default 1)")
    p.add_argument("--token", default=None, help="cluster token (also set as HETBED_CLUSTER_TOKEN)")
    p.add_argument(
        "--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(fn=_cluster)
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
