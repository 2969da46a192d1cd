"""webgrad.webgpu.reset(): a new device replaces the old one (after a device loss in a page,
say); webgpu ops work again afterwards. Run in a subprocess: the reset destroys the device
that the rest of the suite shares. The browser's loss itself is tested in
tests/browser/test_device_lost.py."""
import subprocess
import sys

from conftest import requires_webgpu

SCRIPT = """
import numpy as np
import webgrad
from webgrad.backend.webgpu import backend

before = backend()
kept = webgrad.arange(6.0, device="webgpu").cpu()
webgrad.webgpu.reset()
after = backend()
assert after is not before
y = kept.to("webgpu") * 2
np.testing.assert_array_equal(y.numpy(), np.arange(6.0, dtype=np.float32) * 2)
print("ok")
"""


@requires_webgpu
def test_reset_makes_a_new_device_that_works():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
