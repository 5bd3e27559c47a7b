"""Checkpoint recovery never goes back silently (issue 15, item 2): a restarted chief restores the
newest checkpoint that verifies, wherever the index points, and refuses to start over."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.train.checkpoint import recover_checkpoint


def _run(ckpt: str, steps: int, save_every: int = 1) -> int:
    """Train a counter for ``steps`` steps (restoring what is there); the final global step."""
    with hb.Graph().as_default():
        gs = hb.train.get_or_create_global_step()
        w = hb.Variable(np.zeros(3, np.float32), name="w")
        train = hb.group(hb.assign_add(gs, 1), hb.assign_add(w, np.ones(3, np.float32)))
        with hb.train.MonitoredTrainingSession(
            "", checkpoint_dir=ckpt, save_checkpoint_steps=save_every
        ) as s:
            first = int(s.run(gs))
            np.testing.assert_array_equal(s.run(w), np.full(3, first, np.float32))
            for _ in range(steps):
                s.run(train)
            return first


def _steps(ckpt: str) -> list[int]:
    return sorted(int(m.group(1)) for f in os.listdir(ckpt) if (m := re.search(r"-(\d+)$", f)))


def _corrupt(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))


def test_deleted_index_resumes_from_the_newest_checkpoint(tmp_path):
    ckpt = str(tmp_path)
    _run(ckpt, 4)
    os.remove(os.path.join(ckpt, "checkpoint"))
    with pytest.warns(UserWarning, match="rewrote the checkpoint index.*there was none"):
        assert _run(ckpt, 1) == 4
    assert hb.train.latest_checkpoint(ckpt).endswith("model.ckpt-5")


def test_unreadable_index_and_deleted_newest_file_fall_back_to_older(tmp_path):
    ckpt = str(tmp_path)
    _run(ckpt, 4)
    os.remove(os.path.join(ckpt, "model.ckpt-4"))
    with pytest.warns(UserWarning, match=r"it named .*model\.ckpt-4"):
        assert _run(ckpt, 0) == 3
    with open(os.path.join(ckpt, "checkpoint"), "w") as f:
        f.write("{not json")
    with pytest.warns(UserWarning, match="rewrote the checkpoint index.*ignoring the checkpoint"):
        assert _run(ckpt, 0) == 3


def test_corrupt_newest_checkpoint_is_skipped_with_a_warning_naming_it(tmp_path):
    ckpt = str(tmp_path)
    _run(ckpt, 3)
    newest = os.path.join(ckpt, "model.ckpt-3")
    _corrupt(newest)
    with pytest.warns(UserWarning, match=re.escape(newest) + r".*checksum"):
        assert _run(ckpt, 2) == 2
    assert _steps(ckpt) == [0, 1, 2, 3, 4]  # (model.ckpt-0: saved as the first session began)
    assert hb.train.latest_checkpoint(ckpt).endswith("model.ckpt-4")


def test_refuses_step_zero_when_no_checkpoint_verifies_and_changes_nothing(tmp_path):
    ckpt = str(tmp_path)
    _run(ckpt, 2)
    for s in (0, 1, 2):
        _corrupt(os.path.join(ckpt, f"model.ckpt-{s}"))
    before = {f: open(os.path.join(ckpt, f), "rb").read() for f in os.listdir(ckpt)}
    with pytest.raises(hb.errors.DataLossError, match=r"3 checkpoint file\(s\) but none verifies"):
        _run(ckpt, 1)
    after = {f: open(os.path.join(ckpt, f), "rb").read() for f in os.listdir(ckpt)}
    assert after == before


def test_checkpoint_outside_the_index_is_adopted(tmp_path):
    """A kill between the data file's rename and the index's: the newer file is found, listed,
    and later saves keep honouring max_to_keep over it."""
    ckpt = str(tmp_path)
    _run(ckpt, 2)
    index = os.path.join(ckpt, "checkpoint")
    old_index = open(index, "rb").read()
    _run(ckpt, 1)  # writes model.ckpt-3 and an index naming it
    with open(index, "wb") as f:
        f.write(old_index)  # as if killed before the index's rename
    assert hb.train.latest_checkpoint(ckpt).endswith("model.ckpt-2")
    with pytest.warns(UserWarning, match="rewrote"):
        assert recover_checkpoint(ckpt).endswith("model.ckpt-3")
    st = hb.train.get_checkpoint_state(ckpt)
    assert [os.path.basename(p) for p in st.all_model_checkpoint_paths] == [
        "model.ckpt-0",
        "model.ckpt-1",
        "model.ckpt-2",
        "model.ckpt-3",
    ]
    assert _run(ckpt, 4) == 3
    assert _steps(ckpt) == [3, 4, 5, 6, 7]


def test_stale_temporaries_of_its_own_naming_are_removed(tmp_path):
    ckpt = str(tmp_path)
    _run(ckpt, 1)
    with open(os.path.join(ckpt, "model.ckpt-1"), "rb") as f:
        head = f.read(64)
    with open(os.path.join(ckpt, "model.ckpt-1.meta"), "rb") as f:
        meta = f.read(64)  # the graph document the Saver writes beside a checkpoint
    stale = [".model.ckpt-2.k3j_9x1a.tmp", ".checkpoint.ab12cd34.tmp", ".model.ckpt-2.meta.x1.tmp"]
    keep = [".model.ckpt-3.zz.tmp.bak", "notes.txt", ".other.abcdefgh.tmp", ".notes.meta.ab.tmp"]
    for n in stale:
        with open(os.path.join(ckpt, n), "wb") as f:
            f.write(meta if ".meta." in n else head if "model" in n else b"{")
    for n in keep:
        with open(os.path.join(ckpt, n), "wb") as f:
            f.write(b"user data")
    with pytest.warns(UserWarning, match="interrupted save"):
        assert _run(ckpt, 0) == 1
    left = set(os.listdir(ckpt))
    assert not left & set(stale)
    assert set(keep) <= left


def test_empty_or_missing_folder_starts_fresh(tmp_path):
    assert recover_checkpoint(str(tmp_path / "none")) is None
    assert recover_checkpoint(str(tmp_path)) is None
    (tmp_path / "readme.txt").write_text("not a checkpoint")
    assert recover_checkpoint(str(tmp_path)) is None
