"""Saves killed mid-write, and saves racing each other on one path.

A save writes ``.<name>.<host>-<pid>.<random>.tmp`` and renames it over the
target; a killed save leaves that file, and the next save to the same path
removes it once its process is gone. Live savers' files are never touched.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import webgrad
from webgrad import serialize


def _temp_name(path, pid, host=None, random="abcd1234"):
    return f".{path.name}.{host or serialize._HOST}-{pid}.{random}.tmp"


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_save_removes_stale_temporaries_of_its_path_only(tmp_path):
    path = tmp_path / "model.safetensors"
    dead, alive = _dead_pid(), os.getppid()
    stale = [_temp_name(path, dead), _temp_name(path, dead, random="zz_9x0qa")]
    kept = [_temp_name(path, alive),                     # a concurrent save in another process
            _temp_name(path, os.getpid()),               # ... or in another thread of this one
            _temp_name(path, dead, host="0badc0de"),     # another host on a shared disk
            _temp_name(tmp_path / "other.safetensors", dead),  # another file's
            f".model.safetensors.{dead}.tmp", "model.safetensors.tmp", "notes.txt"]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"partial")
    old = tmp_path / _temp_name(path, alive, host="0badc0de", random="0ld0ld00")
    old.write_bytes(b"partial")
    long_ago = os.path.getmtime(old) - serialize.TEMP_MAX_AGE_S - 60
    os.utime(old, (long_ago, long_ago))
    webgrad.save({"w": webgrad.ones(2)}, path)
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["model.safetensors"])


_KILLED_SAVER = """
import os, sys, time
import numpy as np
import webgrad
from webgrad import serialize
real_write = serialize._write
def slow_write(file, header, arrays):
    file.write(header)
    file.flush()
    open(sys.argv[2], "w").close()  # tell the parent: mid-write now
    time.sleep(60)
serialize._write = slow_write
webgrad.save({"w": webgrad.from_numpy(np.ones(1 << 20, np.float32))}, sys.argv[1])
"""


def test_a_save_killed_mid_write_leaves_a_temporary_that_the_next_save_removes(tmp_path):
    path, ready = tmp_path / "model.safetensors", tmp_path / "ready"
    webgrad.save({"w": webgrad.zeros(3)}, path)
    before = path.read_bytes()
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", _KILLED_SAVER, str(path), str(ready)])
        try:
            deadline = time.monotonic() + 120
            while not ready.exists():
                assert child.poll() is None, "the saver exited before it was killed"
                assert time.monotonic() < deadline, "the saver never started writing"
                time.sleep(0.05)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        ready.unlink()
    leftovers = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    # Each save (killed or not) removed the temporaries of the saves killed before it.
    assert len(leftovers) == 1 and path.read_bytes() == before  # killed saves never touch the file
    webgrad.save({"w": webgrad.ones(3)}, path)
    assert os.listdir(tmp_path) == ["model.safetensors"]
    assert webgrad.load(path)["w"].tolist() == [1.0, 1.0, 1.0]


_CONCURRENT_SAVER = """
import sys
import webgrad
for i in range(15):
    webgrad.save({"w": webgrad.full((1 << 18,), float(i)), "who": sys.argv[2]}, sys.argv[1])
"""


def test_concurrent_savers_to_one_path_never_break_each_other(tmp_path):
    """Each saver sees the other's live temporaries and leaves them alone."""
    path = tmp_path / "shared.safetensors"
    savers = [subprocess.Popen([sys.executable, "-c", _CONCURRENT_SAVER, str(path), name],
                               stderr=subprocess.PIPE, text=True) for name in ("a", "b", "c")]
    errors = [saver.communicate(timeout=300)[1] for saver in savers]
    assert [saver.returncode for saver in savers] == [0, 0, 0], errors
    loaded = webgrad.load(path)
    assert loaded["who"] in ("a", "b", "c") and set(loaded["w"].tolist()) == {14.0}
    assert os.listdir(tmp_path) == ["shared.safetensors"]
