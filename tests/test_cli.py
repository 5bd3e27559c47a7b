"""The command line and the demo: exit codes, outputs, and the demo's numbers."""

import json
import os
import time

import pandas as pd
import pytest

from hetbed.cli import main


def test_devices_json(capsys):
    """`hetbed devices --json` lists this process's CPU."""
    assert main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["device_type"] == "cpu" and rows[0]["name"].endswith("device:cpu:0")


def test_catalog_lists_and_shows_sources(capsys):
    """`hetbed catalog` lists devices and links; one entry shows its numbers with sources."""
    assert main(["catalog", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert "k40" in listing["devices"] and "eth_10g" in listing["links"]
    assert main(["catalog", "k40", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["spec"]["kind"] == "gpu"
    assert "BD-06902-001" in entry["sources"]["memory_bandwidth_bytes_per_s"]


def test_catalog_unknown_name_is_bad_input(capsys):
    """An unknown catalog name exits 2 and lists what exists."""
    assert main(["catalog", "no_such_gpu"]) == 2
    assert "k40" in capsys.readouterr().err


def test_bad_arguments_exit_2():
    """argparse errors exit with status 2."""
    with pytest.raises(SystemExit) as e:
        main(["no-such-command"])
    assert e.value.code == 2


def test_demo_writes_report_and_incast_emerges(tmp_path):
    """The demo writes its report; on 10 GbE a step takes at least 2 x workers x model bytes / NIC
    bandwidth (PS incast), not much more (the rest: the hosts' copies of the bytes at both ends
    and their per-message CPU time), and 100 GbE is faster at every worker count."""
    assert main(["demo", "--out", str(tmp_path), "--quiet"]) == 0
    for name in ("report.html", "report.md", "throughput.png", "timeline.png", "step_trace.json"):
        assert (tmp_path / name).stat().st_size > 0
    df = pd.read_csv(tmp_path / "what_if.csv")
    model_bytes = 4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)
    ten = df[df.network == "10 GbE"].set_index("workers")
    hundred = df[df.network == "100 GbE"].set_index("workers")
    for n, row in ten.iterrows():
        floor = 2 * n * model_bytes / 1.25e9
        assert row.step_time_ms / 1e3 >= floor * 0.999
        assert row.step_time_ms / 1e3 <= floor * 1.35  # the network dominates on 10 GbE
        assert hundred.loc[n].step_time_ms < row.step_time_ms
    html = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in html
    _check_paper_rows(tmp_path)


def _check_paper_rows(out):
    """The paper's rows, over 5 seeds: Figure 8's two values are labelled fitted and compared
    with the model's own best per seed (the gain's error on 9.5%, not on 1.095), within the
    grid search's 2.1% RMS (5% each); Figure 7's are labelled predicted. Recomputed from the
    saved per-run summary, independently of the report code."""
    import numpy as np

    from hetbed.reports import study
    from hetbed.scenarios import results

    sc, summary, *_ = results.load(str(out / "paper_backup_workers"))
    assert sorted(set(summary.run_seed)) == [1, 2, 3, 4, 5]
    runs, _ = study.derive(summary, ["strategy.backup_workers"])
    cmp = study.comparison(sc, study.aggregate(runs, ["strategy.backup_workers"]), runs)
    assert list(cmp.kind) == ["fitted", "fitted"]
    per_seed = runs.groupby("run_seed")
    shortest = per_seed.step_time_p50_s.min()
    assert cmp.predicted[0] == pytest.approx(np.median(shortest))
    assert abs(cmp.error_pct[0]) < 5
    at = per_seed.apply(lambda g: g.strategy_backup_workers[g.step_time_p50_s.idxmin()])
    assert cmp.model_at[0].startswith(f"backup_workers={at.mode().iloc[0]}")
    gain = np.median(per_seed.normalized_speedup.max()) - 1
    assert cmp.error_of[1] == "gain (value - 1)"
    assert cmp.error_pct[1] == pytest.approx((gain - 0.095) / 0.095 * 100)
    assert abs(cmp.error_pct[1]) < 5
    sc, summary, *_ = results.load(str(out / "paper_sync_vs_async"))
    keys = ["cluster.workers", "strategy.kind"]
    runs, _ = study.derive(summary, keys)
    cmp = study.comparison(sc, study.aggregate(runs, keys), runs)
    assert list(cmp.kind) == ["predicted", "predicted"]
    assert cmp.predicted_min[0] < cmp.predicted[0] < cmp.predicted_max[0]
    md = (out / "report.md").read_text()
    assert (
        "Fitted parameters: cluster.worker_efficiency, stragglers.lognormal_sigma, fitted to " in md
    )


def test_every_command_and_flag_has_help():
    """Each command has a description and every one of its arguments a help line."""
    import argparse

    from hetbed.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"run", "sweep", "describe", "report", "compare", "catalog", "demo"} <= set(sub.choices)
    for name, p in sub.choices.items():
        if name == "cluster":  # its flags belong to the launcher's owner (issue 15)
            continue
        assert p.description, name
        for a in p._actions:
            assert a.help, f"hetbed {name} {a.option_strings or a.dest}: no help line"


def test_unknown_flag_gets_the_commands_usage_and_a_close_match(capsys):
    """`hetbed run FILE --output D` is answered with `hetbed run`'s usage and --out."""
    with pytest.raises(SystemExit) as e:
        main(["run", "x.toml", "--output", "d"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: hetbed run" in err and "did you mean --out?" in err


def test_library_studies_run_by_name_and_close_names_are_suggested(capsys):
    """A library study is found by name; a near miss names the study it probably meant."""
    assert main(["describe", "paper_backup_workers"]) == 0
    assert "50 x k40 workers" in capsys.readouterr().out
    assert main(["describe", "paper_backup_worker"]) == 2
    assert "did you mean paper_backup_workers" in capsys.readouterr().err


def test_did_you_mean_for_devices_links_models_and_fields(tmp_path, capsys):
    """Unknown catalog names, models and scenario fields get the closest known name."""
    assert main(["catalog", "v100"]) == 2
    assert "did you mean v100_sxm2" in capsys.readouterr().err
    base = '[scenario]\nname = "x"\n[model]\nname = "resnet50"\n[cluster]\nworkers = 2\n'
    for change, want in (
        (("workers = 2", 'workers = 2\nworker_device = "v100"'), "did you mean v100_sxm2"),
        (("workers = 2", 'workers = 2\nnic = "eth_25"'), "did you mean eth_25g"),
        (("resnet50", "resnet5"), "did you mean resnet50"),
        (("workers = 2", "workers = 2\nworker = 3"), "cluster.worker: unknown field (did you mean"),
    ):
        p = tmp_path / "s.toml"
        p.write_text(base.replace(*change))
        assert main(["describe", str(p)]) == 2
        assert want in capsys.readouterr().err


def test_unreachable_dask_scheduler_is_one_line_after_a_short_timeout(tmp_path, capsys):
    """An unreachable scheduler: exit 1 within seconds, one line naming the address and a way
    out, no traceback."""
    import socket
    import time

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = tmp_path / "s.toml"
    p.write_text(
        '[scenario]\nname = "x"\n[model]\nname = "mlp"\ncompute_s = 0.1\n'
        "[cluster]\nworkers = 2\n[run]\nsteps = 5\n"
    )
    pytest.importorskip("dask.distributed")
    t = time.perf_counter()
    addr = f"tcp://127.0.0.1:{port}"
    assert main(["sweep", str(p), "--dask", addr, "--dask-timeout", "1", "--quiet"]) == 1
    assert time.perf_counter() - t < 10
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and addr in err and "leave out --dask" in err


def test_flags_are_never_abbreviated(capsys):
    """--seed is not --seeds (a prefix would silently run three seeds), --q not --quiet."""
    for argv, near in (
        (["run", "paper_backup_workers", "--seed", "3"], "did you mean --seeds?"),
        (["run", "paper_backup_workers", "--q"], "--q"),
        (["run", "paper_backup_workers", "--jobs", "2"], "--jobs is a flag of hetbed sweep"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "unrecognized arguments" in err and near in err, err


def test_an_output_folder_that_cannot_be_made_fails_before_the_simulation(tmp_path, capsys):
    blocker = tmp_path / "outfile"
    blocker.write_text("")
    t0 = time.perf_counter()
    assert main(["run", "paper_backup_workers", "--out", str(blocker), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--out: " in err and f"{blocker} exists and is not a folder" in err
    assert time.perf_counter() - t0 < 5.0  # the study (seconds of simulation) never started
    for argv in (["demo", "--out", str(blocker), "--quiet"],
                 ["compare", str(tmp_path), str(tmp_path), "--out", str(blocker / "x")]):  # fmt: skip
        assert main(argv) == 2, argv
        assert "--out: " in capsys.readouterr().err
    missing = str(tmp_path / "no_token")
    assert (
        main(["cluster", "--ps", "0", "--workers", "1", "--token-file", missing, "--", "true"]) == 2
    )
    assert f"--token-file {missing}: No such file" in capsys.readouterr().err


def test_catalog_shows_a_broken_entrys_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "mygpu.toml").write_text('name = "bad"\nkind = "gpu"\npeak_flops = "fast"\n')
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    assert main(["catalog", "mygpu"]) == 2
    err = capsys.readouterr().err
    assert "mygpu.toml" in err and "peak_flops" in err and "did you mean" not in err


def test_written_files_get_the_umask_s_permissions(tmp_path):
    from hetbed.devices.fileio import atomic_write

    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "report.md", "hello")
        assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o644
        os.chmod(tmp_path / "report.md", 0o600)  # a replaced file keeps its own
        atomic_write(tmp_path / "report.md", "again")
        assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_results_record_which_catalog_files_they_used(tmp_path, monkeypatch):
    """A catalog entry on HETBED_CATALOG_PATH that replaces a shipped one is named, with its
    file and digest, in the manifest and in the report; shipped entries are recorded too."""
    from hetbed.devices import catalog

    shipped = catalog.entry_file("k40", "devices")
    mine = tmp_path / "cat" / "k40.toml"
    mine.parent.mkdir()
    mine.write_text(shipped.read_text().replace('name = "', 'name = "my copy of ', 1))
    study = tmp_path / "s.toml"
    study.write_text(
        '[scenario]\nname = "prov"\n[model]\nname = "mlp"\ncompute_s = 0.1\n'
        '[cluster]\nworkers = 2\nworker_device = "k40"\n[run]\nsteps = 5\n'
    )
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(mine.parent))
    assert main(["run", str(study), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    k40 = manifest["catalog"]["cluster.worker_device=k40"]
    assert k40["file"] == str(mine) and not k40["builtin"] and k40["shadows_builtin"]
    assert manifest["catalog"]["cluster.nic=eth_10g"]["builtin"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"cluster.worker_device=k40 from {mine}" in report
    assert "in place of the shipped entry" in report


def test_catalog_lists_a_tpu_by_the_dtype_it_computes(capsys):
    """A TPU has no float32 unit: the list shows its bfloat16 peak, not 0.00 TFLOP/s fp32."""
    assert main(["catalog"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("tpu_v3"))
    assert "123.00 TFLOP/s bf16" in line and "fp32" not in line


def test_a_point_that_cannot_run_fails_the_study_before_any_runs(tmp_path, capsys):
    """Every sweep point's simulation is built first: a batch the worker cannot hold fails the
    study at once, naming it, and the output folder it made is not left behind; --jobs 0 is
    refused."""
    study = tmp_path / "big.toml"
    study.write_text(
        '[scenario]\nname = "b"\n[model]\nname = "cnn"\nbatch_size = 64\n'
        '[cluster]\nworkers = 2\nps = 1\nworker_device = "k40"\n[strategy]\nkind = "sync"\n'
        '[run]\nsteps = 3\n[sweep]\n"model.batch_size" = [64, 1048576]\n'
    )
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert main(["run", str(study), "--out", str(out), "--quiet"]) == 2
    assert "model.batch_size: cnn at batch 1048576 does not fit" in capsys.readouterr().err
    assert not out.exists()
    assert time.perf_counter() - t0 < 60
    assert main(["sweep", str(study), "--jobs", "0", "--quiet"]) == 2
    assert "--jobs: expected a positive number" in capsys.readouterr().err


def test_progress_bars_are_redrawn_while_a_long_step_runs():
    """The ticker redraws the step bar (the run bar while no step bar is open) until stopped,
    and not after: a long simulated step shows its elapsed time moving."""
    from hetbed.cli import _Ticker

    class Bar:
        def __init__(self):
            self.n = 0

        def refresh(self):
            self.n += 1

    runs, step = Bar(), Bar()
    steps_bar: list = []
    t = _Ticker([runs, steps_bar], every_s=0.02)
    deadline = time.monotonic() + 5
    while runs.n < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    steps_bar.append(step)
    while step.n < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    t.stop()
    after = (runs.n, step.n)
    time.sleep(0.1)
    assert runs.n >= 2 and step.n >= 2 and (runs.n, step.n) == after


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "a worker killed"])
def test_a_stopped_sweep_ends_its_worker_processes_at_once(tmp_path, sig):
    """SIGTERM (a scheduler's stop) or Ctrl-C to `hetbed sweep --jobs 2`: it exits promptly
    (143 / 130) instead of finishing the sweep, and none of its worker processes is left; a
    worker that dies (the OOM killer) fails the sweep at once (1), naming the point."""
    import signal
    import subprocess
    import sys

    study = tmp_path / "long.toml"
    study.write_text(
        '[scenario]\nname = "long"\n[model]\nname = "inception_v3"\n[cluster]\nworkers = 50\n'
        'ps = 4\nworker_device = "k40"\n[run]\nsteps = 100000\n[sweep]\n'
        '"cluster.workers" = [40, 50, 60, 70]\n'
    )
    exe = os.path.join(os.path.dirname(sys.executable), "hetbed")
    # (Ctrl-C as at a terminal: a test run in the background inherits SIGINT ignored)
    p = subprocess.Popen([exe, "sweep", str(study), "--jobs", "2", "--out", str(tmp_path / "o"),
                          "--quiet"], stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip

    def children() -> list[int]:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(p.pid)], capture_output=True)
        return [int(x) for x in out.stdout.split()]

    try:
        deadline = time.monotonic() + 60
        while len(children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        kids = children()
        assert len(kids) >= 2, "the sweep's pool did not start"
        time.sleep(1.0)  # (the workers under way)
        if sig == "a worker killed":
            workers = [k for k in kids if "spawn_main" in open(f"/proc/{k}/cmdline").read()]
            os.kill(workers[0], signal.SIGKILL)  # (a process this test started, by its pid)
        else:
            p.send_signal(getattr(signal, sig))
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read()
    want = {
        "SIGTERM": (143, "sweep: terminated"),
        "SIGINT": (130, "sweep: interrupted"),
        "a worker killed": (1, "a worker process of the sweep died while it ran point"),
    }
    assert rc == want[sig][0] and want[sig][1] in err, (rc, err)
    time.sleep(0.5)
    left = [
        k
        for k in kids
        if os.path.exists(f"/proc/{k}") and " Z " not in open(f"/proc/{k}/stat").read()
    ]
    assert left == []


def test_ctrl_c_while_results_are_written_leaves_one_run_in_the_folder(
    tmp_path, capsys, monkeypatch
):
    """A Ctrl-C that lands between the files of a results folder takes effect once the folder
    holds the new run in full (not the new summary beside the old manifest): exit 130."""
    import json
    import signal

    from hetbed.scenarios import results

    def study(name: str, workers: int) -> str:
        p = tmp_path / f"{name}.toml"
        p.write_text(
            f'[scenario]\nname = "{name}"\n[model]\nname = "mlp"\ncompute_s = 0.01\n'
            f"[cluster]\nworkers = {workers}\nps = 1\n[run]\nsteps = 3\n"
        )
        return str(p)

    out = str(tmp_path / "out")
    assert main(["run", study("first", 2), "--out", out, "--quiet"]) == 0
    save = results.save

    def interrupted_save(*a, **kw):
        os.kill(os.getpid(), signal.SIGINT)  # (delivered at once to this process's handler)
        return save(*a, **kw)

    monkeypatch.setattr(results, "save", interrupted_save)
    # (Ctrl-C as at a terminal: a test run in the background inherits SIGINT ignored)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(["run", study("second", 4), "--out", out, "--quiet"]) == 130
    finally:
        signal.signal(signal.SIGINT, old_int)
    assert "interrupted after writing the results in full" in capsys.readouterr().err
    assert json.load(open(os.path.join(out, "manifest.json")))["scenario"] == "second"
    assert pd.read_parquet(os.path.join(out, "summary.parquet")).cluster_workers.tolist() == [4]
