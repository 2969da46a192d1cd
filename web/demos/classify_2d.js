// The 2-D classification page: build demos/classify_2d.py's Classify2D from the controls,
// train it, and paint the decision boundary (P(class 1) on a grid) with the points on top.
import {LineChart} from "./chart.js";
import {$, Demo, py} from "./common.js";

const EXTENT = 1.2;  // classify_2d.EXTENT: the plane shown is [-1.2, 1.2]^2
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
  c.clearRect(0, 0, size, size);
  if (boundary) {
    const side = Math.round(Math.sqrt(boundary.length));
    const image = new ImageData(side, side);
    boundary.forEach((p, i) => image.data.set([...shade(p), 255], 4 * i));
    const small = document.createElement("canvas");
    small.width = small.height = side;
    small.getContext("2d").putImageData(image, 0, 0);
    c.imageSmoothingEnabled = true;
    c.drawImage(small, 0, 0, size, size);
  }
  if (!points) return;
  points.xs.forEach(([x, y], i) => {
    c.beginPath();
    c.arc(((x + EXTENT) / (2 * EXTENT)) * size, ((EXTENT - y) / (2 * EXTENT)) * size, 3.5, 0, 2 * Math.PI);
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

async function rebuild() {
  const s = settings();
  await demo.call(`plane = classify_2d.Classify2D(${py(s.dataset)}, ${py(s.layers)}, ${py(s.width)}, `
    + `${py(s.activation)}, ${py(s.lr)})`);
  points = await demo.call("{'xs': plane.points.tolist(), 'labels': plane.labels.tolist()}");
  paint(await demo.call("plane.boundary()"));
  chart.reset();
  demo.fresh = true;
  demo.buttons();
}

let changed = true;
for (const id of ["dataset", "layers", "width", "activation", "lr"]) {
  $(id).addEventListener("change", () => {
    changed = true;
    if (!demo.running && demo.loaded) rebuild().catch((error) => demo.setStatus(error.message, "error"));
  });
}

$("train").addEventListener("click", async () => {
  if (changed || demo.fresh) {
    await rebuild();
    changed = false;
  }
  const steps = Number($("steps").value) || 300;
  await demo.train(`plane.train(${py(steps)}, webgrad_progress, every=10)`, (event) => {
    chart.add(event);
    if (event.boundary) paint(event.boundary);
  });
});

demo.wire({push: (name) => `plane.push(${py(name)})`});
demo.start().then(() => rebuild()).then(() => { changed = false; }).catch(() => {});
/** @type {any} */ (window).webgradDemo = demo;
