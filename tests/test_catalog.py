"""The hardware catalog: shipped device/link files, their sources, user files, and validation."""

import math
import os
from pathlib import Path

import pytest

from hetbed.devices import catalog
from hetbed.devices.catalog import CatalogError, HardwareSpec, LinkSpec
from hetbed.devices.costmodel import perf_from_spec

SHIPPED = sorted(catalog.BUILTIN_DIR.glob("devices/*.toml")) + sorted(
    catalog.BUILTIN_DIR.glob("links/*.toml")
)

GPU_TOML = """\
name = "Test GPU"
kind = "gpu"
host_link = "pcie3_x16"
memory_bandwidth_bytes_per_s = { value = 1e12, source = "Test GPU datasheet (2024)" }
memory_bytes = { value = 1073741824, source = "Test GPU datasheet (2024)" }
kernel_launch_overhead_s = { value = 5e-6, source = "hetbed estimate", note = "a guess" }

[peak_flops]
float32 = { value = 1e13, source = "Test GPU datasheet (2024)" }
"""

LINK_TOML = """\
name = "Test link"
kind = "other"
bandwidth_bytes_per_s = { value = 2e9, source = "Test link spec (2024)" }
latency_s = { value = 3e-6, source = "Test link spec (2024)" }
"""


@pytest.fixture(autouse=True)
def _no_user_catalog(monkeypatch):
    monkeypatch.delenv("HETBED_CATALOG_PATH", raising=False)


def _numbers(node, path=""):
    """Yield (field path, enclosing table) for every number in a parsed TOML document."""
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                yield f"{path}{k}", node
            elif isinstance(v, list):
                for x in v:
                    assert not isinstance(x, (dict, list)), f"{path}{k}: nested list"
                    if isinstance(x, (int, float)):
                        yield f"{path}{k}", node
            else:
                yield from _numbers(v, f"{path}{k}.")


# -- shipped files -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_file_loads(path):
    """Every shipped TOML validates and is listed under its file stem, in the right folder."""
    spec = catalog.load_file(path)
    if path.parent.name == "devices":
        assert isinstance(spec, HardwareSpec) and spec.key in catalog.list_devices()
        assert catalog.load_device(spec.key) == spec
        assert hash(catalog.load_device(spec.key)) == hash(spec)
    else:
        assert isinstance(spec, LinkSpec) and spec.key in catalog.list_links()
        assert catalog.load_link(spec.key) == spec


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_number_has_a_source(path):
    """Each number in a file sits as `value` in a table with a non-empty source; estimates have a note."""
    doc = catalog.tomllib.loads(path.read_text())  # tomllib, or tomli on 3.10
    found = list(_numbers(doc))
    assert found, f"{path.name}: no numbers"
    spec = catalog.load_file(path)
    for fpath, table in found:
        assert fpath.endswith(".value"), f"{path.name}: {fpath}: bare number"
        assert str(table.get("source", "")).strip(), f"{path.name}: {fpath}: no source"
        field = fpath.removesuffix(".value")
        assert spec.sources[field] == table["source"].strip()
        if table["source"].startswith(("hetbed estimate", "hetbed assumption")):
            assert str(table.get("note", "")).strip(), (
                f"{path.name}: {field}: estimate without note"
            )


def test_float32_peaks_increase_by_generation():
    """float32 peak: H100 > A100 > V100 > P100 > K40."""
    order = ["h100_sxm5", "a100_sxm4_40gb", "v100_sxm2", "p100_sxm2", "k40"]
    peaks = [catalog.load_device(k).peak("float32") for k in order]
    assert peaks == sorted(peaks, reverse=True) and len(set(peaks)) == len(peaks)


def test_nvlink_bandwidth_increases_by_generation():
    """Per-GPU aggregate NVLink bandwidth: NVLink4 > NVLink3 > NVLink2 > NVLink1; all 25 GB/s per link from 2.0."""
    bw = [catalog.load_link(f"nvlink{i}").bandwidth_bytes_per_s for i in (4, 3, 2, 1)]
    assert bw == sorted(bw, reverse=True) and len(set(bw)) == 4
    assert {catalog.load_link(f"nvlink{i}").per_link_bandwidth_bytes_per_s for i in (2, 3, 4)} == {
        25e9
    }


def test_network_rates_are_line_rate_over_eight():
    """Ethernet and InfiniBand bandwidths are the data rate / 8: 100GbE = 12.5e9 bytes/s."""
    assert catalog.load_link("eth_100g").bandwidth_bytes_per_s == 12.5e9
    for key, gbit in [("eth_10g", 10), ("eth_25g", 25), ("eth_40g", 40), ("ib_edr", 100)]:
        assert catalog.load_link(key).bandwidth_bytes_per_s == gbit * 1e9 / 8
    assert catalog.load_link("ib_hdr").bandwidth_bytes_per_s == 25e9
    assert catalog.load_link("pcie4_x16").bandwidth_bytes_per_s == pytest.approx(
        2 * catalog.load_link("pcie3_x16").bandwidth_bytes_per_s
    )


def test_device_links_resolve():
    """Every host_link / peer_link / network_link a device names is a link in the catalog."""
    links = set(catalog.list_links())
    for key in catalog.list_devices():
        spec = catalog.load_device(key)
        named = {spec.host_link, spec.peer_link, spec.network_link} - {None}
        assert named <= links, f"{key}: {named - links}"
        if spec.kind in ("gpu", "tpu"):
            assert spec.host_link


def test_tpu_matrix_peak_matches_mxu_geometry():
    """TPU matrix peak = 2 FLOP x rows x cols x MXUs x clock (within 1%), 128x128 MXUs."""
    for key in ("tpu_v2", "tpu_v3", "tpu_v4"):
        t = catalog.load_device(key)
        rows, cols = t.systolic_array_shape
        assert (rows, cols) == (128, 128)
        derived = 2 * rows * cols * t.matrix_units * t.clock_hz
        assert derived == pytest.approx(t.matrix_peak_flops["bfloat16"], rel=0.01), key
    units = [catalog.load_device(f"tpu_v{i}").matrix_units for i in (2, 3, 4)]
    assert units == [2, 4, 8]


def test_gpu_float32_peak_matches_lanes_and_clock():
    """GPU float32 peak = 2 FLOP x FP32 lanes x clock (within 1%)."""
    gpus = [catalog.load_device(k) for k in catalog.list_devices()]
    gpus = [g for g in gpus if g.kind == "gpu"]
    assert len(gpus) >= 7
    for g in gpus:
        assert 2 * g.fp32_lanes * g.clock_hz == pytest.approx(g.peak("float32"), rel=0.01), g.key


def test_matrix_units_beat_vector_units():
    """Where a device lists both, the matrix-unit peak is at least the vector peak."""
    for key in catalog.list_devices():
        spec = catalog.load_device(key)
        for dtype, peak in spec.matrix_peak_flops.items():
            if dtype in spec.peak_flops:
                assert peak >= spec.peak_flops[dtype], (key, dtype)


def test_this_machine_is_a_measured_placeholder():
    """this_machine: every number awaits `hetbed calibrate`; defaults 150 GFLOP/s float32, 10 GB/s."""
    spec = catalog.load_device("this_machine")
    assert spec.kind == "cpu"
    assert set(spec.sources.values()) == {"measured by hetbed calibrate"}
    assert spec.peak("float32") == 150e9
    assert spec.memory_bandwidth_bytes_per_s == 10e9


def test_peak_lookup():
    """peak(dtype, matrix=True) prefers the matrix unit, falls back to the vector peak, else KeyError."""
    v100 = catalog.load_device("v100_sxm2")
    assert v100.peak("float16", matrix=True) == 125e12
    assert v100.peak("float16") == 31.4e12
    assert v100.peak("float32", matrix=True) == 15.7e12

    class _DType:
        name = "float32"

    assert v100.peak(_DType()) == 15.7e12
    with pytest.raises(KeyError, match=r"tpu_v2 has no peak for 'float32'.*bfloat16"):
        catalog.load_device("tpu_v2").peak("float32")


def test_link_transfer_time_and_link_subsets():
    """transfer_time = latency + bytes / bandwidth; with_links(n) scales the per-link bandwidth."""
    eth = catalog.load_link("eth_10g")
    assert eth.transfer_time(1.25e9) == pytest.approx(1.0 + eth.latency_s)
    two = catalog.load_link("nvlink2").with_links(2)
    assert (two.key, two.links, two.bandwidth_bytes_per_s) == ("nvlink2_x2", 2, 50e9)
    with pytest.raises(ValueError, match="no per_link_bandwidth"):
        eth.with_links(2)


def test_unknown_key_names_catalog_and_search_path():
    """An unknown key lists what the catalog has and where to add a file."""
    with pytest.raises(
        CatalogError, match=r"unknown device 'z9000'.*v100_sxm2.*HETBED_CATALOG_PATH"
    ):
        catalog.load_device("z9000")
    with pytest.raises(CatalogError, match=r"unknown link 'warp'.*pcie3_x16"):
        catalog.load_link("warp")


# -- user files ----------------------------------------------------------------------------------


def test_user_file_loads_via_load_file(tmp_path):
    """A user TOML anywhere loads with load_file, with its sources and notes by field path."""
    path = tmp_path / "my_gpu.toml"
    path.write_text(GPU_TOML)
    spec = catalog.load_file(path)
    assert isinstance(spec, HardwareSpec)
    assert (spec.key, spec.name, spec.kind, spec.host_link) == (
        "my_gpu",
        "Test GPU",
        "gpu",
        "pcie3_x16",
    )
    assert spec.peak_flops == {"float32": 1e13} and spec.memory_bytes == 2**30
    assert spec.sources["peak_flops.float32"] == "Test GPU datasheet (2024)"
    assert spec.notes == {"kernel_launch_overhead_s": "a guess"}
    link = tmp_path / "my_link.toml"
    link.write_text(LINK_TOML)
    assert catalog.load_file(link).transfer_time(2e9) == pytest.approx(1 + 3e-6)


def test_user_catalog_path_is_searched_first(tmp_path, monkeypatch):
    """HETBED_CATALOG_PATH dirs (subfolder or flat layout) come before, and can override, the shipped catalog."""
    first, second = tmp_path / "a", tmp_path / "b"
    (first / "devices").mkdir(parents=True)
    second.mkdir()
    (first / "devices" / "my_gpu.toml").write_text(GPU_TOML)
    (first / "devices" / "v100_sxm2.toml").write_text(GPU_TOML.replace("Test GPU", "My V100"))
    (second / "my_link.toml").write_text(LINK_TOML)
    (second / "flat_gpu.toml").write_text(GPU_TOML)
    monkeypatch.setenv("HETBED_CATALOG_PATH", f"{first}{os.pathsep}{second}")

    assert catalog.load_device("my_gpu").peak("float32") == 1e13
    assert catalog.load_device("flat_gpu").kind == "gpu"
    assert catalog.load_device("v100_sxm2").name == "My V100"
    assert catalog.load_link("my_link").latency_s == 3e-6
    assert {"my_gpu", "flat_gpu", "v100_sxm2", "k40"} <= set(catalog.list_devices())
    assert "my_link" in catalog.list_links() and "my_link" not in catalog.list_devices()
    with pytest.raises(CatalogError, match=r"my_link\.toml: kind 'other' is not a device kind"):
        catalog.load_device("my_link")


# -- validation ----------------------------------------------------------------------------------

_DS = 'source = "Test GPU datasheet (2024)"'

BAD_DEVICES = [
    (
        'memory_bytes = { value = 1073741824, source = "Test GPU datasheet (2024)" }\n',
        "",
        r"memory_bytes: missing required field",
    ),
    (
        "float32 = { value = 1e13,",
        "float32 = { value = -1e13,",
        r"peak_flops\.float32: must be finite and positive, got -1e\+13",
    ),
    (
        "value = 1e12,",
        "value = 0,",
        r"memory_bandwidth_bytes_per_s: must be finite and positive, got 0",
    ),
    ('kind = "gpu"', 'kind = "xpu"', r"kind: unknown kind 'xpu'"),
    (
        f"float32 = {{ value = 1e13, {_DS} }}",
        "float32 = 1e13",
        r"peak_flops\.float32: missing source",
    ),
    (
        f"float32 = {{ value = 1e13, {_DS} }}",
        "float32 = { value = 1e13 }",
        r"peak_flops\.float32: missing source",
    ),
    (
        f"float32 = {{ value = 1e13, {_DS} }}",
        'float32 = { value = 1e13, source = " " }',
        r"peak_flops\.float32: missing source",
    ),
    (
        f"float32 = {{ value = 1e13, {_DS} }}",
        f"float32 = {{ value = 1e13, sorce = 'x', {_DS} }}",
        r"peak_flops\.float32: unknown key\(s\) \['sorce'\]",
    ),
    ("float32 =", "float31 =", r"peak_flops\.float31: unknown dtype"),
    ("value = 1073741824,", "value = 1.5,", r"memory_bytes: expected a whole number"),
    ("value = 1e12,", 'value = "fast",', r"memory_bandwidth_bytes_per_s: expected a number"),
    ('host_link = "pcie3_x16"\n', "", r"host_link: missing required field"),
    (
        'memory_bytes = { value = 1073741824, source = "Test GPU datasheet (2024)" }',
        'memory_bytes = "1 GiB"',
        r"memory_bytes: expected \{ value = <number>, source = \.\.\. \}, got '1 GiB'",
    ),
    ('name = "Test GPU"', 'name = "Test GPU"\nmax_power_w = 300', r"max_power_w: unknown field"),
    ('kind = "gpu"', 'kind = "tpu"', r"matrix_peak_flops: missing required field"),
    ('name = "Test GPU"', 'name = "Test GPU', r"invalid TOML"),
    (
        'host_link = "pcie3_x16"\n',
        'host_link = "pcie3_x16"\nstream_bandwidth_bytes_per_s = { value = 2e12, source = "t" }\n',
        r"stream_bandwidth_bytes_per_s: 2e\+12 B/s is above memory_bandwidth_bytes_per_s",
    ),
    (
        "[peak_flops]\n",
        '[unaligned_matrix_peak_flops]\nfloat16 = { value = 1e13, source = "t" }\n[peak_flops]\n',
        r"unaligned_matrix_peak_flops\.float16: only a GPU whose tile_loads is \"tma\"",
    ),
    (
        "[peak_flops]\n",
        'tile_loads = "tma"\n[unaligned_matrix_peak_flops]\n'
        'float16 = { value = 1e13, source = "t" }\n[peak_flops]\n',
        r"unaligned_matrix_peak_flops\.float16: no matrix_peak_flops for this dtype",
    ),
    (
        "[peak_flops]\n",
        'tile_loads = "tma"\n[matrix_peak_flops]\nfloat16 = { value = 1e14, source = "t" }\n'
        '[unaligned_matrix_peak_flops]\nfloat16 = { value = 2e14, source = "t" }\n[peak_flops]\n',
        r"unaligned_matrix_peak_flops\.float16: 2e\+14 FLOP/s is above matrix_peak_flops\.float16",
    ),
]


@pytest.mark.parametrize(
    "old,new,message",
    BAD_DEVICES,
    ids=[m.split(":")[0].replace("\\", "") for _, _, m in BAD_DEVICES],
)
def test_validation_errors_name_file_and_field(tmp_path, old, new, message):
    """Each malformed device file raises CatalogError naming the file and the field path."""
    assert old in GPU_TOML
    path = tmp_path / "bad.toml"
    path.write_text(GPU_TOML.replace(old, new, 1))
    with pytest.raises(CatalogError, match=rf"^bad\.toml: {message}"):
        catalog.load_file(path)


def test_tpu_fields_are_validated(tmp_path):
    """A TPU needs a [rows, cols] systolic shape and an MXU count, each with a source."""
    tpu = GPU_TOML.replace('kind = "gpu"', 'kind = "tpu"') + (
        f"[matrix_peak_flops]\nbfloat16 = {{ value = 1e14, {_DS} }}\n"
    )
    path = tmp_path / "t.toml"
    path.write_text(tpu)
    with pytest.raises(
        CatalogError, match=r"^t\.toml: systolic_array_shape: missing required field"
    ):
        catalog.load_file(path)
    shape = f"systolic_array_shape = {{ value = [128], {_DS} }}\n"
    path.write_text(shape + tpu)
    with pytest.raises(
        CatalogError, match=r"^t\.toml: systolic_array_shape: expected \[rows, cols\]"
    ):
        catalog.load_file(path)
    ok = shape.replace("[128]", "[128, 128]") + f"matrix_units = {{ value = 2, {_DS} }}\n"
    path.write_text(ok + tpu)
    spec = catalog.load_file(path)
    assert spec.systolic_array_shape == (128, 128) and spec.matrix_units == 2
    assert spec.peak("bfloat16", matrix=True) == 1e14


def test_link_aggregate_must_match_its_links(tmp_path):
    """A link's bandwidth must equal links x per-link bandwidth when both are given."""
    path = tmp_path / "agg.toml"
    src = 'source = "Test link spec (2024)"'
    path.write_text(
        LINK_TOML
        + f"links = {{ value = 4, {src} }}\nper_link_bandwidth_bytes_per_s = {{ value = 1e9, {src} }}\n"
    )
    with pytest.raises(CatalogError, match=r"^agg\.toml: bandwidth_bytes_per_s: 2e\+09 differs"):
        catalog.load_file(path)


def test_missing_file_is_a_catalog_error(tmp_path):
    """load_file on a path that does not exist raises CatalogError with the path."""
    with pytest.raises(CatalogError, match="no such catalog file"):
        catalog.load_file(tmp_path / "nope.toml")
    assert math.isfinite(catalog.load_device("k40").memory_bytes)
    assert Path(catalog.load_device("k40").path).name == "k40.toml"


def test_a_measured_streaming_rate_is_the_memory_rate(tmp_path):
    """A GPU's ``stream_bandwidth_bytes_per_s`` (measured) is the rate the cost model moves bytes
    at; without it, the datasheet's bandwidth. The H200 and H100 carry hetbed's measurements."""
    path = tmp_path / "g.toml"
    path.write_text(GPU_TOML)
    plain = catalog.load_file(path)
    assert plain.memory_rate == plain.memory_bandwidth_bytes_per_s == 1e12
    path.write_text(
        GPU_TOML.replace(
            "[peak_flops]",
            'stream_bandwidth_bytes_per_s = { value = 8.5e11, source = "measured" }\n[peak_flops]',
        )
    )
    spec = catalog.load_file(path)
    assert spec.memory_rate == 8.5e11 and perf_from_spec(spec).memory_bandwidth == 8.5e11
    for key in ("h200_sxm", "h100_sxm5"):
        h = catalog.load_device(key)
        assert 0.85 < h.memory_rate / h.memory_bandwidth_bytes_per_s < 0.95
        assert "gpu_memory_sweep" in h.sources["stream_bandwidth_bytes_per_s"]
