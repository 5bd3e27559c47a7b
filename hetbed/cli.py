"""The ``hetbed`` command line: ``run``, ``sweep``, ``describe``, ``fit``, ``report``,
``compare``, ``devices``, ``catalog``, ``calibrate``, ``demo``, ``cluster``. ``hetbed COMMAND -h`` explains
each command and all of its flags.

Exit codes: 0 ok, 2 bad input, 1 failure, 130 interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
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
        spec = None
        for load in (catalog.load_device, catalog.load_link, catalog.load_host):
            try:
                spec = load(args.name)
                break
            except catalog.CatalogError as e:  # not this kind of entry: try the next
                if not str(e).startswith("unknown ") and " is not a " not in str(e):
                    print(f"hetbed catalog: {e}", file=sys.stderr)  # its file is broken
                    return 2
        if spec is None:
            known = catalog.list_devices() + catalog.list_links() + catalog.list_hosts()
            near = difflib.get_close_matches(args.name, known, n=3, cutoff=0.5)
            print(
                f"hetbed catalog: no device, link or host topology named {args.name!r}"
                + (f" (did you mean {' or '.join(near)}?)" if near else "")
                + f"; devices: {', '.join(catalog.list_devices())}; links: "
                f"{', '.join(catalog.list_links())}; hosts: {', '.join(catalog.list_hosts())}",
                file=sys.stderr,
            )
            return 2
        fields = {k: v for k, v in vars(spec).items() if k not in ("sources", "notes")}
        if isinstance(spec, catalog.HostSpec):  # its cables, one line each
            fields["wires"] = [
                f"{w.a} <-> {w.b}: {w.link.key} {w.link.bandwidth_bytes_per_s / 1e9:g} GB/s"
                for w in spec.wires
            ]
        if args.json:
            print(json.dumps({"spec": fields, "sources": spec.sources}, indent=1, default=str))
        else:
            for k, v in fields.items():
                if isinstance(v, list):  # a host's cables
                    print(k)
                    for item in v:
                        print(f"  {item}")
                    continue
                if isinstance(v, dict) and v:  # per dtype: a line and a source each
                    for sub, x in v.items():
                        src = spec.sources.get(f"{k}.{sub}") or spec.sources.get(k)
                        name = f"{k}.{sub}"
                        print(f"{name:32s} {x!s:40s} {('[' + src + ']') if src else ''}")
                    continue
                src = spec.sources.get(k)
                print(f"{k:32s} {v!s:40s} {('[' + src + ']') if src else ''}")
            if isinstance(spec, catalog.HostSpec):
                for k, src in spec.sources.items():
                    if k not in fields:
                        print(f"{k:32s} [{src}]")
        return 0
    devs = [catalog.load_device(k) for k in catalog.list_devices()]
    links = [catalog.load_link(k) for k in catalog.list_links()]
    hosts = [catalog.load_host(k) for k in catalog.list_hosts()]
    if args.json:
        keys = {"devices": devs, "links": links, "hosts": hosts}
        print(json.dumps({k: [x.key for x in v] for k, v in keys.items()}))
        return 0
    print("devices:")
    for d in devs:
        # float32's vector peak, or (a TPU: no float32 unit) the dtype its matrix unit computes
        peaks = {**d.matrix_peak_flops, **d.peak_flops}
        dtype = "float32" if "float32" in peaks else max(peaks, key=peaks.get, default="float32")
        short = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)
        print(
            f"  {d.key:22s} {d.kind:4s} {peaks.get(dtype, 0.0) / 1e12:8.2f} TFLOP/s {short:4s} "
            f"{d.memory_bandwidth_bytes_per_s / 1e9:8.1f} GB/s  {d.name}"
        )
    print("links:")
    for x in links:
        print(
            f"  {x.key:22s} {x.bandwidth_bytes_per_s / 1e9:8.2f} GB/s {x.latency_s * 1e6:8.2f} us  {x.name}"
        )
    print("host topologies:")
    for h in hosts:
        print(f"  {h.key:22s} {h.gpus:3d} GPUs {len(h.wires):4d} cables  {h.name}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from hetbed.scenarios.models.small import CALIBRATION_BUILDERS
    from hetbed.simulator.calibrate import calibrate, load_builders

    if args.quiet:
        progress = lambda m: None  # noqa: E731
    else:  # with --json the document alone goes to stdout
        progress = lambda m: print(m, file=sys.stderr if args.json else sys.stdout)  # noqa: E731
    if args.repeats < 1:
        raise ValueError(f"--repeats: expected a positive integer, got {args.repeats}")
    builders = load_builders(args.model) if args.model else CALIBRATION_BUILDERS
    _writable_folder(args.out, "--out")
    perf, prof, ms = calibrate(args.out, builders, args.repeats, progress)
    if args.json:
        print(
            json.dumps(
                {
                    "peak_float32_flops": perf.peak_flops["float32"],
                    "memory_bandwidth": perf.memory_bandwidth,
                    "dispatch_overhead_s": perf.launch_overhead_s,
                    "measurements": [{"name": m.name, "unit": m.unit, **m.row(1.0)} for m in ms],
                    "profile_entries": len(prof.table),
                    "out": args.out,
                }
            )
        )
    elif not args.quiet:
        print(
            f"use it: HETBED_CATALOG_PATH={args.out} (device 'this_machine', link 'loopback'), "
            f"Profiled.load('{args.out}/profile.json')"
        )
    return 0


def _run_file(args: argparse.Namespace, jobs: int, dask: str | None) -> int:
    import os
    import time

    from hetbed.scenarios import results, runner, schema

    sc = schema.load(runner.find_scenario(args.file))
    if args.seeds is not None:
        if args.seeds < 1:
            raise ValueError(f"--seeds: expected a positive integer, got {args.seeds}")
        sc["run"]["seeds"] = args.seeds
    points = schema.expand(sc)
    stem = os.path.splitext(os.path.basename(args.file))[0]
    out = args.out or os.path.join("out", stem)
    earlier = os.path.join(out, "manifest.json")
    replacing = os.path.isfile(earlier)
    made = not os.path.exists(out)
    _writable_folder(out, "--out")  # before the simulation, not after it
    bar = None
    steps_bar: list = []  # the steps of the point running in this process (one at a time)
    if not args.quiet and not args.json:
        print(schema.describe(sc), file=sys.stderr)
        if replacing:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(earlier)))
            print(f"replacing the results in {out} (of {when}) when this run ends", file=sys.stderr)
        from tqdm import tqdm

        bar = tqdm(total=len(points), unit="run", file=sys.stderr, mininterval=0.5)

    def progress(done: int, total: int, summary: dict) -> None:
        if steps_bar:
            steps_bar.pop().close()
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"{summary['step_time_p50_s']:.3g} s/step")

    def step_progress(done: int, total: int) -> None:
        if bar is None:
            return
        if not steps_bar:
            steps_bar.append(
                tqdm(total=total, unit="step", file=sys.stderr, mininterval=0.5, leave=False)
            )
        steps_bar[0].update(done - steps_bar[0].n)  # (falls back after a rollback)

    t0 = time.perf_counter()
    ticking = _Ticker([bar, steps_bar]) if bar is not None else None
    try:
        runner.preflight(points)  # every point's driver built first: a bad point fails now
        res = runner.run_all(
            points,
            jobs=jobs,
            dask_address=dask,
            progress=progress,
            dask_timeout_s=getattr(args, "dask_timeout", 5.0),
            step_progress=step_progress,
        )
    except BaseException:
        if made and os.path.isdir(out) and not os.listdir(out):
            os.rmdir(out)  # (the folder this run made, still empty)
        raise
    finally:
        if ticking is not None:
            ticking.stop()
        for b in steps_bar:
            b.close()
        if bar is not None:
            bar.close()
    if not args.quiet and not args.json:
        print("writing the results and the report ...", file=sys.stderr)
    with _signals_deferred():  # the folder holds one run's results, never two runs' parts
        paths = results.save(out, sc, res, time.perf_counter() - t0)
        paths.update(results.report(out))
    summary = results.load(out)[1]
    if args.json:
        print(
            json.dumps(
                {"out": out, "report": paths["html"], "summary": summary.to_dict(orient="records")},
                default=str,
            )
        )
    elif not args.quiet:
        from hetbed.reports import study

        late = study.failures_not_reached(sc, summary)
        if late:
            print(f"note: {late}", file=sys.stderr)
        keys = [study.col(k) for k in sc.get("sweep", {})]
        cols = ["point"] + keys + ["run_seed", "step_time_p50_s", "examples_per_s"]
        print(summary[[c for c in dict.fromkeys(cols) if c in summary]].to_string(index=False))
        print(f"results: {out}  report: {paths['html']}")
    return 0


class _signals_deferred:  # noqa: N801 (a context manager, named as one)
    """Ctrl-C and SIGTERM held back while a results folder is written (its files are replaced
    one at a time): a signal then takes effect once the folder holds the new run in full.
    (Python-level handlers that only note the signal: an OS-level block of the main thread
    would not hold back a signal the kernel gives another thread.)"""

    def __enter__(self) -> None:
        import signal
        import threading

        self._got: list[int] = []
        self._old: dict = {}

        def note(signum: int, frame: object) -> None:
            if self._got:  # a second one: the user insists (the folder may then mix two runs)
                raise (
                    _Terminated("while writing the results")
                    if signum == signal.SIGTERM
                    else (KeyboardInterrupt("while writing the results"))
                )
            self._got.append(signum)

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:  # (an ignored one stays so)
                    self._old[sig] = signal.signal(sig, note)

    def __exit__(self, *exc: object) -> None:
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)
        if self._got and exc[0] is None:
            why = "after writing the results in full"
            if self._got[0] == signal.SIGTERM:
                raise _Terminated(why)
            raise KeyboardInterrupt(why)


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread (cli.main)."""


class _Ticker:
    """Redraws the progress bars every second so that their elapsed time moves during a long
    step (a step of 1,000 simulated workers can take a minute of wall time, and a bar is
    otherwise redrawn only when a step or a run ends)."""

    def __init__(self, bars: list, every_s: float = 1.0):
        import threading

        self._bars, self._every = bars, every_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hetbed-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            for b in list(self._bars[1]) or [self._bars[0]]:
                try:
                    b.refresh()
                except Exception:  # (a bar closed between the check and the redraw)
                    pass

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


def _writable_folder(path: str, flag: str) -> None:
    """Make the output folder ``path`` (or find it) and check it can be written; ValueError
    naming ``flag`` otherwise."""
    import os

    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag}: {path} exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{flag}: cannot make the folder {path}: {e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{flag}: the folder {path} is not writable")


def _run(args: argparse.Namespace) -> int:
    return _run_file(args, 1, None)


def _sweep(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise ValueError(f"--jobs: expected a positive number of processes, got {args.jobs}")
    return _run_file(args, args.jobs, args.dask)


def _describe(args: argparse.Namespace) -> int:
    from hetbed.scenarios import runner, schema

    sc = schema.load(runner.find_scenario(args.file))
    schema.expand(sc)  # every sweep point is checked too, as run checks them
    if args.json:
        doc = {k: v for k, v in sc.items() if not k.startswith("_")}
        doc["non_defaults"] = schema.non_defaults(sc)
        print(json.dumps(doc, default=str))
    else:
        print(schema.describe(sc))
    return 0


def _report(args: argparse.Namespace) -> int:
    from hetbed.scenarios import results

    paths = results.report(args.results)
    if args.json:
        print(json.dumps(paths))
    elif not args.quiet:
        print(f"report: {paths['html']}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    import os

    from hetbed.scenarios import results

    out = args.out
    if out is None:
        name = lambda p: os.path.basename(os.path.normpath(p))  # noqa: E731
        out = os.path.join("out", f"compare_{name(args.a)}_vs_{name(args.b)}")
    replacing = os.path.exists(os.path.join(out, "report.html"))
    _writable_folder(out, "--out")
    if replacing and not args.quiet and not args.json:
        print(f"replacing the comparison in {out}", file=sys.stderr)
    paths = results.compare(args.a, args.b, out)
    if args.json:
        print(json.dumps(paths))
    elif not args.quiet:
        print(f"report: {paths['html']}")
    return 0


def _fit(args: argparse.Namespace) -> int:
    from hetbed.scenarios import fit, runner, schema

    sc = schema.load(runner.find_scenario(args.file))
    if args.seeds is not None:
        if args.seeds < 1:
            raise ValueError(f"--seeds: expected a positive integer, got {args.seeds}")
        sc["run"]["seeds"] = args.seeds
    grid = fit.parse_grid(args.grid)
    targets = fit.targets(sc)

    def progress(done: int, total: int, row: dict) -> None:
        if not args.quiet and not args.json:
            what = ", ".join(
                f"{k}={row[k]:g}" if isinstance(row[k], float) else f"{k}={row[k]}" for k in grid
            )
            print(
                f"  [{done}/{total}] {what}: rms error {row['rms_error_pct']:.1f}%", file=sys.stderr
            )

    if args.jobs < 1:
        raise ValueError(f"--jobs: expected a positive number of processes, got {args.jobs}")
    table = fit.grid_search(sc, grid, jobs=args.jobs, progress=progress)
    if args.out:
        table.to_csv(args.out, index=False)
    if args.json:
        print(
            json.dumps({"targets": targets, "grid": table.to_dict(orient="records")}, default=str)
        )
    elif not args.quiet:
        pubs = sc["scenario"]["published"]
        print(
            "fitted to: "
            + "; ".join(f"[{i}] {pubs[i].get('note', pubs[i]['metric'])}" for i in targets)
        )
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        best = table.iloc[0]
        print(
            "best: "
            + ", ".join(f"{k} = {best[k]}" for k in grid)
            + f" (rms error {best.rms_error_pct:.1f}% over {sc['run']['seeds']} seeds)"
        )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from hetbed.demo import run_demo

    _writable_folder(args.out, "--out")  # before the studies run, not after them
    return run_demo(args.out, quiet=args.quiet)


def _cluster(args: argparse.Namespace) -> int:
    from hetbed.runtime.distributed.launcher import launch

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    from hetbed.runtime.distributed.launcher import read_token_file

    if args.token is not None:
        print(
            "hetbed cluster: --token would show the token to every local user in the process "
            "list; put it in a file only you can read and pass --token-file PATH, or set "
            "HETBED_CLUSTER_TOKEN (by default a random token is generated)",
            file=sys.stderr,
        )
        return 2
    token = os.environ.get("HETBED_CLUSTER_TOKEN") or None
    if args.token_file:
        try:
            token = read_token_file(args.token_file)
        except (OSError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            print(f"hetbed cluster: --token-file {args.token_file}: {why}", file=sys.stderr)
            return 2
    try:
        return launch(
            command,
            args.ps,
            args.workers,
            token=token,
            grace_s=args.grace,
            deadline_s=args.deadline,
            restarts=args.restart,
            use_token=not args.no_token,
        )
    except ValueError as e:
        print(f"hetbed cluster: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the command could not be started
        print(f"hetbed cluster: cannot start {command!r}: {e}", file=sys.stderr)
        return 2


_JSON = "print a machine-readable JSON document instead of text"
_QUIET = "print nothing but errors"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (``hetbed COMMAND -h`` prints one's flags)."""
    parser = argparse.ArgumentParser(
        prog="hetbed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # --seed is no abbreviation of --seeds
    )
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    p = sub.add_parser(
        "devices",
        help="list the real devices of this process",
        description="List the real devices of this process (CPU, GPUs).",
    )
    p.add_argument("--json", action="store_true", help=_JSON)
    p.set_defaults(fn=_devices)
    p = sub.add_parser(
        "catalog",
        help="list simulated hardware (or show one entry with sources)",
        description="List the simulated devices and links of the hardware "
        "catalog, or show one entry with the source of every number.",
    )
    p.add_argument("name", nargs="?", help="a device or link key, e.g. v100_sxm2 or eth_25g")
    p.add_argument("--json", action="store_true", help=_JSON)
    p.set_defaults(fn=_catalog)
    p = sub.add_parser(
        "calibrate",
        help="measure this machine and profile ops for the cost model",
        description="Measure this machine (GEMM rate, memory bandwidth, dispatch "
        "cost, loopback TCP rate and latency), each several times with the other processes' "
        "load, and profile the ops of the small models and of synchronous updates (or of your "
        "own, --model) for the cost model.",
    )
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="profile your own training step instead of the small models and the ops of "
        "synchronous updates: a function (in a "
        "module, or FILE.py:FUNCTION) that adds it to the default graph and returns "
        "(train_op, feed_dict); repeat for several",
    )
    p.add_argument(
        "--out",
        default="out/calibration",
        help="folder for the device entry and profile (default out/calibration)",
    )
    p.add_argument(
        "--repeats", type=int, default=10, help="timed repeats per measurement (default 10)"
    )
    p.add_argument("--quiet", action="store_true", help=_QUIET)
    p.add_argument("--json", action="store_true", help=_JSON)
    p.set_defaults(fn=_calibrate)
    for name, fn, helptext in (
        ("run", _run, "simulate a scenario (all its sweep points) and write results + report"),
        ("sweep", _sweep, "like run, with sweep points in parallel processes or on Dask"),
    ):
        p = sub.add_parser(
            name,
            help=helptext,
            description=helptext[0].upper()
            + helptext[1:]
            + ". FILE is a scenario file or the name of a library study "
            "(hetbed run paper_backup_workers).",
        )
        p.add_argument("file", metavar="FILE|NAME", help="scenario file or library study name")
        p.add_argument("--out", default=None, help="results folder (default out/<name>)")
        p.add_argument(
            "--seeds",
            type=int,
            default=None,
            metavar="N",
            help="repeat every point with N seeds (overrides run.seeds)",
        )
        p.add_argument("--quiet", action="store_true", help=_QUIET)
        p.add_argument("--json", action="store_true", help=_JSON)
        if name == "sweep":
            p.add_argument("--jobs", type=int, default=2, help="local worker processes (default 2)")
            p.add_argument(
                "--dask",
                default=None,
                metavar="ADDRESS",
                help="run on an existing Dask scheduler (tcp://host:8786) instead of local "
                "processes",
            )
            p.add_argument(
                "--dask-timeout",
                type=float,
                default=5.0,
                metavar="S",
                help="give up connecting to the Dask scheduler after S seconds (default 5)",
            )
        p.set_defaults(fn=fn)
    p = sub.add_parser(
        "fit",
        help="fit a scenario's parameters to its published values (grid search)",
        description="Grid search over scenario fields: simulate every combination (every "
        "sweep point and seed) and rank them by the RMS error on the published entries "
        "marked fitted = true; the others stay out of sample.",
    )
    p.add_argument("file", metavar="FILE|NAME", help="scenario file or library study name")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2,...",
        help="a field and its candidate values (repeat for each fitted field)",
    )
    p.add_argument("--seeds", type=int, default=None, metavar="N", help="overrides run.seeds")
    p.add_argument("--jobs", type=int, default=1, help="local worker processes (default 1)")
    p.add_argument("--out", default=None, metavar="CSV", help="also write the table as CSV")
    p.add_argument("--quiet", action="store_true", help=_QUIET)
    p.add_argument("--json", action="store_true", help=_JSON)
    p.set_defaults(fn=_fit)
    p = sub.add_parser(
        "describe",
        help="say what a scenario will simulate",
        description="Say what a scenario will simulate: every setting that "
        "differs from its default, and the sweep.",
    )
    p.add_argument("file", metavar="FILE|NAME", help="scenario file or library study name")
    p.add_argument("--json", action="store_true", help=_JSON)
    p.set_defaults(fn=_describe)
    p = sub.add_parser(
        "report",
        help="regenerate the report of a results folder",
        description="Regenerate report.md and report.html of a results folder "
        "from its saved tables (no simulation).",
    )
    p.add_argument("results", help="a results folder written by hetbed run or sweep")
    p.add_argument("--quiet", action="store_true", help=_QUIET)
    p.add_argument("--json", action="store_true", help=_JSON)
    p.set_defaults(fn=_report)
    p = sub.add_parser(
        "compare",
        help="compare two results folders side by side",
        description="Compare two results folders: the same figures with both "
        "studies, and a table of metric deltas per setting (B - A).",
    )
    p.add_argument("a", metavar="A", help="the first results folder (the reference)")
    p.add_argument("b", metavar="B", help="the second results folder")
    p.add_argument(
        "--out",
        default=None,
        help="report folder (default out/compare_<A>_vs_<B>, after the two folders' names)",
    )
    p.add_argument("--quiet", action="store_true", help=_QUIET)
    p.add_argument("--json", action="store_true", help=_JSON)
    p.set_defaults(fn=_compare)
    p = sub.add_parser(
        "demo",
        help="run the headline study and write its report",
        description="Run the headline study (the paper's experiments, a network "
        "what-if, calibration, real training) and write its report.",
    )
    p.add_argument("--out", default="out/demo", help="report folder (default out/demo)")
    p.add_argument("--quiet", action="store_true", help=_QUIET)
    p.set_defaults(fn=_demo)
    p = sub.add_parser(
        "cluster",
        help="run a command as the PS and worker tasks of a local gRPC cluster",
        description="Start --ps + --workers processes running COMMAND on free loopback ports, "
        "each with HETBED_CONFIG naming the cluster and its task (hb.train.cluster_from_env()); "
        "stop the PS tasks once every worker has exited. Exit 0 when all workers exited 0; "
        "a task that fails (beyond --restart) stops the whole cluster at once, named.",
    )
    p.add_argument("--ps", type=int, default=1, help="number of PS tasks (default 1)")
    p.add_argument("--workers", type=int, default=1, help="number of worker tasks (default 1)")
    p.add_argument("--token", default=None, help=argparse.SUPPRESS)  # refused: see _cluster
    p.add_argument(
        "--token-file",
        default=None,
        help="read the cluster token from this file (mode 600); default: HETBED_CLUSTER_TOKEN, "
        "else a fresh random token, passed to the tasks in their environment only",
    )
    p.add_argument("--no-token", action="store_true", help="run the cluster without a token")
    p.add_argument(
        "--restart",
        type=int,
        default=0,
        help="restart a failed task up to N times before stopping the cluster (default 0)",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="stop every task and fail when the workers have not finished after S seconds",
    )
    p.add_argument(
        "--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(fn=_cluster)
    for p in sub.choices.values():
        p.allow_abbrev = False
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    args, extra = parser.parse_known_args(argv)
    if extra:  # answered by the command's own usage, with the closest flag
        cmd = sub.choices[args.cmd]
        flags = [o for a in cmd._actions for o in a.option_strings]
        unknown = [x for x in extra if x.startswith("-")] or extra
        flag = unknown[0].split("=")[0]
        near = difflib.get_close_matches(flag, flags, n=1, cutoff=0.5)
        elsewhere = [
            name
            for name, p in sub.choices.items()
            if any(flag in a.option_strings for a in p._actions)
        ]
        hint = f" (did you mean {near[0]}?)" if near else ""
        if elsewhere and not near:
            hint = f" ({flag} is a flag of hetbed {' and hetbed '.join(elsewhere)})"
        elif elsewhere:
            hint = f" (did you mean {near[0]}? {flag} is a flag of hetbed {' and hetbed '.join(elsewhere)})"
        cmd.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    import signal
    import threading

    def terminated(signum: int, frame: object) -> None:
        raise _Terminated

    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a job scheduler's, a launcher's stop) unwinds as Ctrl-C does: the sweep's
        # worker processes are ended, partial results are not written
        signal.signal(signal.SIGTERM, terminated)
    try:
        return args.fn(args)
    except KeyboardInterrupt as e:
        print(
            f"hetbed {args.cmd}: interrupted {e.args[0] if e.args else ''}".rstrip(),
            file=sys.stderr,
        )
        return 130  # (the shell's code for a SIGINT)
    except _Terminated as e:
        print(
            f"hetbed {args.cmd}: terminated {e.args[0] if e.args else ''}".rstrip(), file=sys.stderr
        )
        return 143  # (the shell's code for a SIGTERM)
    except ConnectionError as e:
        print(f"hetbed {args.cmd}: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        from hetbed.scenarios.runner import SweepWorkerDied

        if not isinstance(e, SweepWorkerDied):
            raise
        print(f"hetbed {args.cmd}: {e}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, KeyError) as e:
        print(f"hetbed {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
