// The 2-D classification page: build demos/classify_2d.py's Classify2D from the controls,
// train it, and paint the decision boundary (P(class 1) on a grid) with the points on top.
// Train runs the Steps asked on the current model; Reset or a changed control builds a new one.
import {LineChart} from "./chart.js";
import {$, Demo, plotScale} from "./common.js";

const EXTENT = 1.2;  // classify_2d.EXTENT: the plane shown is [-1.2, 1.2]^2
const RADIUS = 3.5;  // a point's radius in canvas pixels
const CONTROLS = ["dataset", "layers", "width", "activation", "lr"];
const demo = new Demo("classify_2d");
const chart = new LineChart($("chart"), ["loss", "accuracy"]);
let points = null;  // {xs: [[x, y], ...], labels: [0|1, ...]}

// Blue for class 0, orange for class 1; p = P(class 1) blends between them through white.
function shade(p) {
  const blue = [31, 111, 235], orange = [240, 140, 40], t = Math.abs(p - 0.5) * 2, to = p > 0.5 ? orange : blue;
  return to.map((c) => Math.round(255 + (c - 255) * 0.55 * t));
}

function paint(boundary) {
  const canvas = $("plane"), c = canvas.getContext("2d"), size = canvas.width;
  const s = plotScale(size, EXTENT, 0);  // the points lie within 1.1, so the plane's edge keeps them whole
  c.clearRect(0, 0, size, size);
  if (boundary) {
    const side = Math.round(Math.sqrt(boundary.length));
    const image = new ImageData(side, side);
    boundary.forEach((p, i) => image.data.set([...shade(p), 255], 4 * i));
    const small = document.createElement("canvas");
    small.width = small.height = side;
    small.getContext("2d").putImageData(image, 0, 0);
    c.imageSmoothingEnabled = true;
    c.drawImage(small, 0, 0, size, size);  // grid cell i covers the plane's i-th slice (cell centres)
  }
  if (!points) return;
  points.xs.forEach(([x, y], i) => {
    c.beginPath();
    c.arc(s.x(x), s.y(y), RADIUS, 0, 2 * Math.PI);
    c.fillStyle = points.labels[i] ? "#d9480f" : "#1f6feb";
    c.strokeStyle = "#fff";
    c.fill();
    c.stroke();
  });
}

function settings() {
  return {dataset: $("dataset").value, layers: Number($("layers").value) || 2, width: Number($("width").value) || 16,
          activation: $("activation").value, lr: Number($("lr").value) || 0.03};
}

/** A new, untrained model from the controls; paints its boundary and the points. */
async function rebuild() {
  const s = settings();
  const {xs, labels, boundary} = await demo.call("start", [s.dataset, s.layers, s.width, s.activation, s.lr]);
  points = {xs, labels};
  paint(boundary);
  chart.reset();
  demo.fresh = true;
}

function startOver() {
  demo.task("building a new model…", rebuild, "ready: a new model");
}

for (const id of CONTROLS) $(id).addEventListener("change", startOver);
$("reset").addEventListener("click", startOver);

$("train").addEventListener("click", () => {
  const steps = Number($("steps").value) || 300;
  demo.train({steps, onProgress: (event) => {
    chart.add(event);
    if (event.boundary) paint(event.boundary);
  }});
});

demo.controls = [...CONTROLS, "reset"].map((id) => $(id));
demo.wire();
demo.start(rebuild);
/** @type {any} */ (window).webgradDemo = demo;
