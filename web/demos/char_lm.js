// The tiny-transformer page: train demos/char_lm.py's CharLM; every 50 steps the model writes
// a sample (at the chosen temperature), shown newest first; Sample writes one more.
import {LineChart} from "./chart.js";
import {$, Demo, py} from "./common.js";

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

$("train").addEventListener("click", async () => {
  if (demo.fresh) {
    chart.reset();
    $("sample-text").textContent = "";
    await demo.call("lm = char_lm.CharLM()");
  }
  const steps = Number($("steps").value) || 300;
  $("sample").disabled = true;
  await demo.train(`lm.train(${py(steps)}, webgrad_progress, every=10, sample_every=50, `
    + `temperature=${py(temperature())})`, (event) => {
    chart.add(event);
    if (event.sample) showSample(event.step, event.sample);
  });
  $("sample").disabled = demo.fresh;
});

$("sample").addEventListener("click", async () => {
  $("sample").disabled = true;
  try {
    showSample(null, await demo.call(`lm.sample('\\n', 160, ${py(temperature())})`));
  } catch (error) {
    demo.setStatus(error.message, "error");
  }
  $("sample").disabled = false;
});

demo.wire({push: (name) => `lm.push(${py(name)})`});
demo.start().catch(() => {});
/** @type {any} */ (window).webgradDemo = demo;
