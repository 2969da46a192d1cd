"""End to end on the numpy backend: the shipped digits train to >= 95% test
accuracy with the demo scripts' MLP and CNN, exactly as `python demos/x.py` runs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import webgrad
from demos.digits_cnn import DigitsCNN
from demos.digits_mlp import build_model, train

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name, factory, epochs", [("mlp", build_model, 20), ("cnn", DigitsCNN, 12)])
def test_digits_reach_95_percent_on_numpy(name, factory, epochs):
    webgrad.manual_seed(0)
    losses, accuracy = train(factory(), device="cpu", epochs=epochs, log=None)
    assert accuracy >= 0.95, f"{name}: test accuracy {accuracy:.3f}"
    assert losses[-1] < losses[0] / 4


def test_demo_script_runs_as_a_user_would():
    result = subprocess.run([sys.executable, "demos/digits_mlp.py", "--epochs", "3"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    accuracy = float(result.stdout.strip().splitlines()[-1].split()[-1])
    assert accuracy > 0.9, result.stdout
