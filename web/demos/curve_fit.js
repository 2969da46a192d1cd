// The curve-fitting page: demos/curve_fit.py's CurveFit through the points; a click on the
// plot adds a point (the model keeps training from where it is); the curve redraws live.
import {LineChart} from "./chart.js";
import {$, Demo, py} from "./common.js";

const demo = new Demo("curve_fit");
const chart = new LineChart($("chart"), ["loss"]);
let xs = [], ys = [], curve = null;

function paint() {
  const canvas = $("plot"), c = canvas.getContext("2d"), size = canvas.width;
  const px = (x) => ((x + 1) / 2) * size, py_ = (y) => ((1 - y) / 2) * size;
  c.clearRect(0, 0, size, size);
  c.strokeStyle = "#d5d9df";
  c.beginPath();
  c.moveTo(0, size / 2); c.lineTo(size, size / 2); c.moveTo(size / 2, 0); c.lineTo(size / 2, size);
  c.stroke();
  if (curve) {
    c.strokeStyle = "#1f6feb";
    c.lineWidth = 2.5;
    c.beginPath();
    curve.forEach((y, i) => {
      const x = -1 + (2 * i) / (curve.length - 1);
      if (i) c.lineTo(px(x), py_(y)); else c.moveTo(px(x), py_(y));
    });
    c.stroke();
    c.lineWidth = 1;
  }
  c.fillStyle = "#d9480f";
  xs.forEach((x, i) => { c.beginPath(); c.arc(px(x), py_(ys[i]), 4.5, 0, 2 * Math.PI); c.fill(); });
}

async function sendPoints() {
  await demo.call(`fit.set_points(${py(xs)}, ${py(ys)})`);
}

$("plot").addEventListener("click", async (event) => {
  const rect = $("plot").getBoundingClientRect();
  xs.push(+((2 * (event.clientX - rect.left)) / rect.width - 1).toFixed(4));
  ys.push(+(1 - (2 * (event.clientY - rect.top)) / rect.height).toFixed(4));
  paint();
  if (!demo.running && demo.loaded) await sendPoints();  // else sent before the next training run
});

async function reset() {
  await demo.call("fit = curve_fit.CurveFit()");
  [xs, ys] = await demo.call("curve_fit.default_points()");
  curve = await demo.call("fit.curve()");
  chart.reset();
  demo.fresh = true;
  demo.buttons();
  paint();
}

$("reset").addEventListener("click", () => { if (!demo.running) reset(); });
$("train").addEventListener("click", async () => {
  await sendPoints();
  await demo.train(`fit.train(${py(Number($("steps").value) || 500)}, webgrad_progress, every=10)`, (event) => {
    chart.add(event);
    if (event.curve) { curve = event.curve; paint(); }
  });
});

demo.wire({push: (name) => `fit.push(${py(name)})`});
paint();
demo.start().then(reset).catch(() => {});
/** @type {any} */ (window).webgradDemo = demo;
