"""Train the model and save it: `python train.py --steps 50` natively, or in headless
Chromium with `python -m webgrad.browser run train.py --files model.py --out out/ -- --steps 50`."""
import argparse
import json

import webgrad
from model import fit, make_data, make_model

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100)
args = parser.parse_args()

try:
    report = webgrad_progress  # noqa: F821  (defined in the page by the webgrad runtime)
except NameError:
    def report(fields):
        pass

x, y = make_data()
model = make_model()
losses = fit(model, x, y, steps=args.steps,
             on_step=lambda step, loss: report({"step": step, "loss": loss}) if step % 10 == 0 else None)
print(f"device {x.device}: loss {losses[0]:.4f} -> {losses[-1]:.4f} after {args.steps} steps")
webgrad.save(model.state_dict(), "model.safetensors")
with open("losses.json", "w") as f:
    json.dump(losses, f)
