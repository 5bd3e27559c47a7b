"""The command line and the demo: exit codes, outputs, and the demo's numbers."""

import json

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
    bandwidth (PS incast), and 100 GbE is faster at every worker count."""
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
        assert row.step_time_ms / 1e3 <= floor * 1.2  # the network dominates on 10 GbE
        assert hundred.loc[n].step_time_ms < row.step_time_ms
    html = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in html
