// The digits demo page: train demos/digits.py's DigitsDemo (MLP or CNN) with a live chart,
// then classify what is drawn on the pad (shrunk to 8x8 like the dataset, ten bars).
import {ProbabilityBars} from "../widget/bars.js";
import {toPixels} from "../widget/image.js";
import {DrawingPad} from "../widget/pad.js";
import {LineChart} from "./chart.js";
import {$, Demo} from "./common.js";

const demo = new Demo("digits");
const chart = new LineChart($("chart"), ["loss", "accuracy"]);
const bars = new ProbabilityBars($("bars"), "0123456789".split(""));
let busy = false, again = false;

function showPreview(pixels) {
  const context = $("preview").getContext("2d");
  const image = context.createImageData(8, 8);
  pixels.forEach((v, i) => {
    image.data.set([255 * v, 255 * v, 255 * v, 255], 4 * i);
  });
  context.putImageData(image, 0, 0);
}

async function classify(pad) {
  if (!pad.drawn) return;
  const pixels = toPixels(pad.canvas, {height: 8, width: 8, fit: "ink"});
  showPreview(pixels);
  // The hint has its own line: the status line belongs to training ("stopped at step N" stays).
  $("draw-hint").textContent = demo.running ? "predictions after training stops" : demo.fresh ? "train a model first" : "";
  if (demo.fresh || demo.running) {
    $("prediction").textContent = "";
    return;
  }
  if (busy) { again = true; return; }
  busy = true;
  try {
    // The pixels move to the worker (a Float32Array, transferred); ten probabilities come back.
    const probabilities = await demo.call("predict", [pixels], {transfer: [pixels.buffer]});
    bars.show(probabilities);
    $("prediction").textContent = String(probabilities.indexOf(Math.max(...probabilities)));
  } catch (error) {
    $("prediction").textContent = "";
    demo.setStatus(`prediction failed: ${error.message}`, "error");
  } finally {
    busy = false;
  }
  if (again) { again = false; classify(pad); }
}

const pad = new DrawingPad($("pad"), {lineWidth: 24, onchange: classify});
$("clear").addEventListener("click", () => {
  pad.clear();
  bars.clear();
  $("prediction").textContent = "";
  showPreview(new Float32Array(64));
});

// The Embed snippet comes from the stored record (the CNN is a class of demos/digits.py, so its
// snippet carries trust-code); the name follows the model kind.
$("kind").addEventListener("change", () => { $("model-name").value = `digits-${$("kind").value}`; });

$("train").addEventListener("click", async () => {
  if (!demo.idle) return;
  chart.reset();
  const kind = $("kind").value, steps = Number($("steps").value) || 300, lr = Number($("lr").value) || 0.01;
  // Each Train starts a new model from the controls.
  await demo.train({steps, before: () => demo.call("start", [kind, lr]), onProgress: (event) => chart.add(event)});
  classify(pad);
});

demo.controls = [$("kind"), $("lr")];
demo.wire();
demo.start();  // the status line shows why if it fails
/** @type {any} */ (window).webgradDemo = demo;  // for tests and the console
