// plane.js: a plane to click for a model of one or two real inputs (input kind "points").
//
// Two inputs (dims 2): the whole plane is colored by the model's answer (the class with the
// highest probability, lighter where it is less sure; or a value scale for a regression),
// and a click asks the model about that point. One input (dims 1): the curve y = f(x) over
// the x range, and a click at x reads f(x) off it. By keyboard: arrows move a cross, Enter
// or Space asks at the cross.
import {describe} from "./fields.js";

const SIZE = 300;   // canvas pixels (CSS scales it to fit the page)
const GRID = 48;    // cells per side of the colored map: 2304 points in one predict() call
const SAMPLES = 120;  // points along the curve
const STEPS = 24;   // an arrow key moves the cross 1/24 of the range
const PALETTE = [[31, 111, 235], [232, 89, 12], [47, 158, 68], [174, 62, 201], [245, 159, 0], [12, 166, 120],
  [224, 49, 49], [92, 124, 250], [134, 142, 150], [214, 51, 108]];

/** The class with the largest value in row `row` of a [N, K] output, and its softmax probability. */
function best(outputs, row, classes) {
  let index = 0, top = -Infinity;
  for (let k = 0; k < classes; k++) if (outputs[row * classes + k] > top) { top = outputs[row * classes + k]; index = k; }
  let total = 0;
  for (let k = 0; k < classes; k++) total += Math.exp(outputs[row * classes + k] - top);
  return {index, confidence: 1 / total};
}

export class ClickPlane {
  /**
   * @param {HTMLElement} box  where the plane goes
   * @param {{dims: number, x_range: number[], y_range?: number[] | null}} record  the input record
   * @param {string[] | null} labels  class names
   * @param {{predict: (points: Float32Array) => Promise<any>, evaluate: (points: Float32Array) => Promise<any>}} calls
   *   predict: a person's question (fires the element's `prediction`); evaluate: drawing the map
   */
  constructor(box, record, labels, {predict, evaluate}) {
    this.dims = record.dims;
    this.xRange = record.x_range || [-1, 1];
    this.yRange = record.y_range || (this.dims === 2 ? [-1, 1] : null);  // dims 1: fitted to the curve
    this.labels = labels;
    this.predict = predict;
    this.evaluate = evaluate;
    this.cursor = {x: (this.xRange[0] + this.xRange[1]) / 2, y: 0};
    this.marker = null;
    const wrap = document.createElement("div");
    wrap.className = "plane";
    this.canvas = document.createElement("canvas");
    this.canvas.width = this.canvas.height = SIZE;
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("part", "plane");
    this.canvas.setAttribute("role", "application");
    this.canvas.setAttribute("aria-label", this.dims === 2
      ? `a plane from x ${this.xRange[0]} to ${this.xRange[1]}, y ${this.yRange[0]} to ${this.yRange[1]}: click a `
        + "point, or move the cross with the arrow keys and press Enter, to see the model's answer there"
      : `x from ${this.xRange[0]} to ${this.xRange[1]}: click, or move with the arrow keys and press Enter, to `
        + "read the model's value there");
    this.context = this.canvas.getContext("2d");
    this.output = document.createElement("output");
    this.output.className = "answer";
    this.output.setAttribute("part", "label");
    this.output.setAttribute("aria-live", "polite");
    this.legend = document.createElement("div");
    this.legend.className = "legend";
    wrap.append(this.canvas, this.output, this.legend);
    box.append(wrap);
    this.canvas.addEventListener("click", (event) => {
      const rect = this.canvas.getBoundingClientRect();
      const u = (event.clientX - rect.left) / rect.width, v = (event.clientY - rect.top) / rect.height;
      this.cursor = {x: this.xRange[0] + u * (this.xRange[1] - this.xRange[0]),
                     y: this.yRange ? this.yRange[1] - v * (this.yRange[1] - this.yRange[0]) : 0};
      this.ask();
    });
    this.canvas.addEventListener("keydown", (event) => this.key(event));
    this.background = null;
  }

  key(event) {
    const dx = (this.xRange[1] - this.xRange[0]) / STEPS;
    const dy = this.yRange ? (this.yRange[1] - this.yRange[0]) / STEPS : 0;
    const clamp = (v, range) => Math.min(range[1], Math.max(range[0], v));
    const moves = {ArrowLeft: [-dx, 0], ArrowRight: [dx, 0], ArrowUp: [0, dy], ArrowDown: [0, -dy]};
    if (moves[event.key]) {
      event.preventDefault();
      this.cursor = {x: clamp(this.cursor.x + moves[event.key][0], this.xRange),
                     y: this.dims === 2 ? clamp(this.cursor.y + moves[event.key][1], this.yRange) : 0};
      this.draw();
    } else if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      this.ask();
    }
  }

  toPixel(x, y) {
    return [(x - this.xRange[0]) / (this.xRange[1] - this.xRange[0]) * SIZE,
            (this.yRange[1] - y) / (this.yRange[1] - this.yRange[0]) * SIZE];
  }

  /** Color the plane (dims 2) or draw the curve (dims 1): one predict() over a grid of points. */
  async drawModel() {
    const [x0, x1] = this.xRange;
    if (this.dims === 2) {
      const [y0, y1] = this.yRange;
      const points = new Float32Array(GRID * GRID * 2);
      for (let r = 0; r < GRID; r++) {
        for (let c = 0; c < GRID; c++) {
          points[2 * (r * GRID + c)] = x0 + (c + 0.5) / GRID * (x1 - x0);
          points[2 * (r * GRID + c) + 1] = y1 - (r + 0.5) / GRID * (y1 - y0);  // row 0 is the top
        }
      }
      this.map = await this.evaluate(points);
    } else {
      const points = Float32Array.from({length: SAMPLES}, (_, i) => x0 + (i / (SAMPLES - 1)) * (x1 - x0));
      this.map = await this.evaluate(points);
      if (!this.yRange) {
        const ys = this.map.shape[1] === 1 ? Array.from(this.map.outputs) : [0, 1];
        const low = Math.min(...ys), high = Math.max(...ys), pad = Math.max(1e-3, (high - low) * 0.15);
        this.yRange = [low - pad, high + pad];
      }
    }
    this.paintBackground();
    this.showLegend();
    this.draw();
  }

  paintBackground() {
    const {context} = this;
    const {outputs, shape} = this.map;
    const classes = shape[1];
    context.fillStyle = "#fff";
    context.fillRect(0, 0, SIZE, SIZE);
    let low = Infinity, high = -Infinity;
    for (const v of outputs) { low = Math.min(low, v); high = Math.max(high, v); }
    // The colour of answer `row`, mixed with white by how sure the model is (opaque, so
    // neighbouring cells never overlap into darker seams).
    const color = (row) => {
      let rgb, amount;
      if (classes > 1) {
        const {index, confidence} = best(outputs, row, classes);
        rgb = PALETTE[index % PALETTE.length];
        amount = 0.15 + 0.45 * confidence;
      } else {
        const t = high > low ? (outputs[row] - low) / (high - low) : 0.5;  // blue (low) to orange (high)
        rgb = t < 0.5 ? PALETTE[0] : PALETTE[1];
        amount = 0.1 + 0.6 * Math.abs(t - 0.5) * 2;
      }
      return rgb.map((c) => Math.round(255 + (c - 255) * amount));
    };
    const cells = this.dims === 2 ? [GRID, GRID] : classes > 1 ? [SAMPLES, 1] : null;
    if (cells) {
      // One pixel per answer on a small canvas, scaled up smoothly onto the plane.
      const [columns, rows] = cells;
      const small = document.createElement("canvas");
      small.width = columns;
      small.height = rows;
      const pixels = new ImageData(columns, rows);
      for (let i = 0; i < columns * rows; i++) {
        pixels.data.set([...color(i), 255], 4 * i);
      }
      small.getContext("2d").putImageData(pixels, 0, 0);
      context.imageSmoothingEnabled = true;
      context.drawImage(small, 0, 0, SIZE, SIZE);
    }
    this.axes();
    if (this.dims === 1 && classes === 1) {
      context.strokeStyle = "#1f6feb";
      context.lineWidth = 2.5;
      context.beginPath();
      for (let i = 0; i < SAMPLES; i++) {
        const x = this.xRange[0] + (i / (SAMPLES - 1)) * (this.xRange[1] - this.xRange[0]);
        const [px, py] = this.toPixel(x, outputs[i]);
        if (i) context.lineTo(px, py); else context.moveTo(px, py);
      }
      context.stroke();
    }
    this.background = context.getImageData(0, 0, SIZE, SIZE);
  }

  axes() {
    const {context} = this;
    context.strokeStyle = "rgba(29, 35, 43, 0.35)";
    context.lineWidth = 1;
    const [zx, zy] = this.toPixel(0, 0);
    context.beginPath();
    if (zx >= 0 && zx <= SIZE) { context.moveTo(zx, 0); context.lineTo(zx, SIZE); }
    if (zy >= 0 && zy <= SIZE) { context.moveTo(0, zy); context.lineTo(SIZE, zy); }
    context.stroke();
    context.fillStyle = "#5b6472";
    context.font = "12px system-ui, sans-serif";
    const number = (v) => String(Number(v.toPrecision(3)));
    context.fillText(number(this.xRange[0]), 4, SIZE - 6);
    const right = number(this.xRange[1]);
    context.fillText(right, SIZE - 4 - context.measureText(right).width, SIZE - 6);
    context.fillText(number(this.yRange[1]), 4, 14);
  }

  showLegend() {
    this.legend.textContent = "";
    if (this.map.shape[1] < 2) return;
    for (let k = 0; k < this.map.shape[1]; k++) {
      const item = document.createElement("span");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      const [r, g, b] = PALETTE[k % PALETTE.length];
      swatch.style.background = `rgb(${r}, ${g}, ${b})`;
      item.append(swatch, String(this.labels?.[k] ?? k));
      this.legend.append(item);
    }
  }

  /** Redraw the map and the cross (keyboard cursor) and the last answer's marker. */
  draw() {
    const {context} = this;
    if (this.background) context.putImageData(this.background, 0, 0);
    if (!this.yRange) return;
    const cross = (x, y, size, colour) => {
      const [px, py] = this.toPixel(x, y);
      context.strokeStyle = colour;
      context.lineWidth = 2;
      context.beginPath();
      context.moveTo(px - size, py); context.lineTo(px + size, py);
      context.moveTo(px, py - size); context.lineTo(px, py + size);
      context.stroke();
    };
    if (this.dims === 1) {
      const [px] = this.toPixel(this.cursor.x, 0);
      context.strokeStyle = "rgba(29, 35, 43, 0.5)";
      context.setLineDash([4, 4]);
      context.beginPath();
      context.moveTo(px, 0); context.lineTo(px, SIZE);
      context.stroke();
      context.setLineDash([]);
    } else {
      cross(this.cursor.x, this.cursor.y, 6, "#1d232b");
    }
    if (this.marker) {
      const [px, py] = this.toPixel(this.marker.x, this.marker.y);
      context.fillStyle = "#1d232b";
      context.beginPath();
      context.arc(px, py, 5, 0, 2 * Math.PI);
      context.fill();
    }
  }

  /** Ask the model about the point under the cross; show the answer next to it and below. */
  async ask() {
    const {x, y} = this.cursor;
    const point = this.dims === 2 ? Float32Array.of(x, y) : Float32Array.of(x);
    const where = this.dims === 2 ? `(${x.toFixed(2)}, ${y.toFixed(2)})` : `f(${x.toFixed(2)})`;
    this.output.textContent = "…";
    try {
      const result = await this.predict(point);
      const regression = result.label === undefined && result.outputs.length === 1;
      this.marker = {x, y: this.dims === 2 ? y : regression ? result.outputs[0] : this.yRange[1]};
      this.output.textContent = this.dims === 2 || !regression ? `${where}: ${describe(result)}`
        : `${where} = ${describe(result)}`;
      this.draw();
    } catch {
      this.output.textContent = "";  // the element shows the error under the widget
    }
  }
}

export const PLANE_CSS = `
.plane { display: flex; flex-direction: column; gap: 0.3rem; max-width: 100%; }
.plane canvas { width: 260px; max-width: 100%; height: auto; aspect-ratio: 1; cursor: crosshair;
                box-shadow: 0 0 0 1px #d5d9df; border-radius: 6px; }  /* no border: clicks map 1:1 */
.legend { display: flex; flex-wrap: wrap; gap: 0.2rem 0.8rem; font-size: 12px; color: #5b6472; }
.swatch { display: inline-block; width: 0.8rem; height: 0.8rem; border-radius: 2px; margin-right: 0.3rem;
          vertical-align: -0.1rem; }
`;
