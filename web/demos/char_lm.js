// The tiny-transformer page: train demos/char_lm.py's CharLM; every few steps the model writes
// a sample (at the chosen temperature), shown newest first; Sample writes one more. Train
// continues the model for Steps more steps; Reset starts over.
import {LineChart} from "./chart.js";
import {$, Demo} from "./common.js";

const SAMPLE_EVERY = 50;  // steps between samples while training (a sample costs a few steps' time)
const demo = new Demo("char_lm");
const chart = new LineChart($("chart"), ["loss"]);

function showSample(step, text) {
  const entry = document.createElement("div");
  const title = document.createElement("strong");
  title.textContent = step === null ? "sample:" : `step ${step}:`;
  entry.append(title, document.createTextNode(`\n${text}\n\n`));
  $("sample-text").prepend(entry);
}

const temperature = () => Number($("temperature").value) || 0.8;
$("temperature").addEventListener("input", () => { $("temperature-value").textContent = temperature().toFixed(1); });

/** A new, untrained model (and no samples). */
async function setup() {
  await demo.call("start");
  chart.reset();
  $("sample-text").textContent = "";
  demo.fresh = true;
}

$("train").addEventListener("click", () => {
  const steps = Number($("steps").value) || 300;
  demo.train({
    steps,
    args: [SAMPLE_EVERY, temperature()],
    onProgress: (event) => {
      chart.add(event);
      if (event.sample) showSample(event.step, event.sample);
    },
  });
});

$("reset").addEventListener("click", () => demo.task("building a new model…", setup, "ready: a new model"));

$("sample").addEventListener("click", async () => {
  const text = await demo.task("writing a sample…", () => demo.call("sample", ["\n", 160, temperature()]));
  if (typeof text === "string") showSample(null, text);
});

demo.controls = [$("reset")];
demo.modelControls = [$("sample")];
demo.wire();
demo.start(setup);
/** @type {any} */ (window).webgradDemo = demo;
