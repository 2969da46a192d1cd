// The curve-fitting page: demos/curve_fit.py's CurveFit through the points; the curve redraws
// live. A click on the plot adds a point: while idle it starts a short refit at once; during a
// run, the refit follows that run (the worker runs one call at a time).
import {LineChart} from "./chart.js";
import {$, Demo, plotScale} from "./common.js";

const REFIT_STEPS = 150;  // a click's refit: enough for the curve to reach a new point
const RADIUS = 4.5;  // a point's radius in canvas pixels
const demo = new Demo("curve_fit");
const chart = new LineChart($("chart"), ["loss"]);
let xs = [], ys = [], curve = null;
let added = false;  // a point was added during a run: refit after it

function scale() {
  return plotScale($("plot").width, 1, RADIUS + 3);  // x and y in [-1, 1], points whole at the edges
}

function paint() {
  const canvas = $("plot"), c = canvas.getContext("2d"), s = scale();
  c.clearRect(0, 0, canvas.width, canvas.height);
  c.strokeStyle = "#d5d9df";
  c.beginPath();
  c.moveTo(s.x(-1), s.y(0)); c.lineTo(s.x(1), s.y(0)); c.moveTo(s.x(0), s.y(-1)); c.lineTo(s.x(0), s.y(1));
  c.stroke();
  if (curve) {
    c.strokeStyle = "#1f6feb";
    c.lineWidth = 2.5;
    c.beginPath();
    curve.forEach((y, i) => {
      const x = -1 + (2 * i) / (curve.length - 1);
      if (i) c.lineTo(s.x(x), s.y(y)); else c.moveTo(s.x(x), s.y(y));
    });
    c.stroke();
    c.lineWidth = 1;
  }
  c.fillStyle = "#d9480f";
  xs.forEach((x, i) => { c.beginPath(); c.arc(s.x(x), s.y(ys[i]), RADIUS, 0, 2 * Math.PI); c.fill(); });
}

/** A new model through the page's points (the demo's default points when there are none). */
async function setup() {
  ({xs, ys, curve} = await demo.call("start", [xs, ys]));  // no points yet: the demo's default ones
  chart.reset();
  demo.fresh = true;
  paint();
}

async function train(steps, label) {
  added = false;
  const finished = await demo.train({
    steps, label,
    before: () => demo.call("set_points", [xs, ys]),
    onProgress: (event) => {
      chart.add(event);
      if (event.curve) { curve = event.curve; paint(); }
    },
  });
  if (finished && added) await train(REFIT_STEPS, "refitting");  // points clicked during the run
}

$("plot").addEventListener("click", (event) => {
  if (!demo.idle && !demo.running) return;  // starting or resetting: the points are being replaced
  const rect = $("plot").getBoundingClientRect(), s = scale(), ratio = $("plot").width / rect.width;
  const clamp = (v) => +Math.max(-1, Math.min(1, v)).toFixed(4);  // the curve is fitted on [-1, 1]
  xs.push(clamp(s.fromX((event.clientX - rect.left) * ratio)));
  ys.push(clamp(s.fromY((event.clientY - rect.top) * ratio)));
  paint();
  if (demo.running) added = true;
  else train(REFIT_STEPS, "refitting");
});

$("reset").addEventListener("click", () => {
  if (!demo.idle) return;
  xs = []; ys = [];
  demo.task("resetting…", setup, "ready: the default points and a new model");
});
$("train").addEventListener("click", () => train(Number($("steps").value) || 500, "training"));

demo.controls = [$("reset")];
demo.wire();
paint();
demo.start(setup);
/** @type {any} */ (window).webgradDemo = demo;
