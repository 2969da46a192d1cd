"""Curve-fitting demo: a small MLP regression y = f(x) through a handful of points.

    python demos/curve_fit.py --steps 800

The page /demos/curve_fit.html runs this same file in the browser worker (fetched from
/demos/py/curve_fit.py and imported as a module once): it calls the page's functions at the
end of this file by name with its points as arrays (``runtime.call``, never Python source):
``start`` makes a model through them, ``train`` sends the fitted curve with every progress event.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

import webgrad
from webgrad import nn
from webgrad.web.worker import progress

CURVE_POINTS = 101  # where the fitted curve is sampled over [-1, 1]


def default_points(n: int = 16, seed: int = 0) -> tuple[list[float], list[float]]:
    """Noisy samples of a wavy curve on [-1, 1]."""
    rng = np.random.default_rng(seed)  # its own seed: the same points whatever webgrad.manual_seed says
    xs = [-1 + 2 * i / (n - 1) for i in range(n)]
    noise = rng.normal(0, 0.08, n).tolist()
    return xs, [0.6 * math.sin(3 * x) + 0.3 * x + e for x, e in zip(xs, noise)]


def make_model(width: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(1, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1))


class CurveFit:
    def __init__(self, xs=None, ys=None, width=32, lr=0.01, seed=0, device=None):
        webgrad.manual_seed(seed)
        self.device = device
        self.model = make_model(width).to(device)
        self.optimizer = webgrad.optim.Adam(self.model.parameters(), lr=lr)
        self.grid = webgrad.linspace(-1, 1, CURVE_POINTS, device=device).reshape(-1, 1)
        self.step = 0
        if xs is None:
            xs, ys = default_points()
        self.set_points(xs, ys)

    def set_points(self, xs, ys) -> None:
        """Replace the data (x and y in [-1, 1]); the model keeps what it learned so far."""
        xs, ys = [float(v) for v in xs], [float(v) for v in ys]
        if len(xs) != len(ys) or not xs:
            raise ValueError(f"CurveFit.set_points: need as many x as y values (at least one), "
                             f"got {len(xs)} and {len(ys)}")
        self.x = webgrad.tensor(xs, device=self.device).reshape(-1, 1)
        self.y = webgrad.tensor(ys, device=self.device).reshape(-1, 1)

    def curve(self) -> list[float]:
        """The model's y at CURVE_POINTS evenly spaced x in [-1, 1]."""
        with webgrad.no_grad():
            return self.model(self.grid).reshape(-1).tolist()

    def train(self, steps: int, on_progress=None, every: int = 10) -> float:
        total = self.step + steps
        loss = None
        for _ in range(steps):
            loss = nn.functional.mse_loss(self.model(self.x), self.y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.step += 1
            if on_progress is not None and (self.step % every == 0 or self.step == total):
                on_progress({"step": self.step, "total": total, "loss": loss.item(), "curve": self.curve()})
        return float("nan") if loss is None else loss.item()

    def push(self, name: str, url=None) -> dict:
        """Save the model to the store: its input is x in [-1, 1] (a curve y = f(x))."""
        metadata = {"demo": "curve_fit", "x_range": [-1, 1], "y_range": [-1, 1]}
        return webgrad.store.push(self.model, name, metadata, url=url, input_size=(1, 1))


# ----------------------------------------------------------------------------- the page's calls
# The page's model lives here, so the page names functions rather than writing Python.

current: CurveFit | None = None


def _current() -> CurveFit:
    if current is None:
        raise RuntimeError("curve_fit: no model yet; call start(...) first")
    return current


def start(xs=None, ys=None) -> dict:
    """A new, untrained model through the page's points (``default_points()`` when none are given);
    returns the points {xs, ys} and the model's curve."""
    global current
    if not xs:
        xs, ys = default_points()
    current = CurveFit(xs, ys)
    return {"xs": list(xs), "ys": list(ys), "curve": current.curve()}


def set_points(xs, ys) -> None:
    """The page's points (clicks add some) for the page's model to fit from now on."""
    _current().set_points(xs, ys)


def train(steps: int, every: int = 10) -> float:
    """``steps`` more steps of the page's model, each ``every``-th reported as a progress event."""
    return _current().train(int(steps), progress, every=int(every))


def push(name: str) -> dict:
    """Save the page's model to the store (the page's own server) as ``name``."""
    return _current().push(str(name))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    args = parser.parse_args(argv)
    from tqdm import tqdm  # native runs only (pip install tqdm); the page reports through on_progress

    demo = CurveFit(device=args.device)
    with tqdm(total=args.steps, desc="curve fit") as bar:
        def progress(event):
            bar.update(event["step"] - bar.n)
            bar.set_postfix(loss=f"{event['loss']:.4f}")
        loss = demo.train(args.steps, progress, every=50)
    curve = demo.curve()
    print("x     fitted y")
    for i in range(0, CURVE_POINTS, 20):
        print(f"{-1 + 2 * i / (CURVE_POINTS - 1):+.1f}  {curve[i]:+.3f}")
    print(f"final mean squared error: {loss:.4f}")
    return loss


if __name__ == "__main__":
    main()
