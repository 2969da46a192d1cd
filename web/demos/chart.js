// chart.js: a small live line chart on a <canvas> for the demo pages: one line per field
// (loss, accuracy, ...) against step, each scaled to its own range, redrawn at most once a
// frame. The demos log a few hundred points; the playground's uPlot charts are for more.

const COLORS = ["#1f6feb", "#d9480f", "#2b8a3e", "#9c36b5"];

export class LineChart {
  /** @param {HTMLCanvasElement} canvas  @param {string[]} fields */
  constructor(canvas, fields) {
    this.canvas = canvas;
    this.fields = fields;
    this.reset();
  }

  reset() {
    this.steps = [];
    this.series = this.fields.map(() => []);
    this.draw();
  }

  /** Add one event's values (fields missing from it are skipped). */
  add(event) {
    if (typeof event.step !== "number") return;
    this.steps.push(event.step);
    this.fields.forEach((field, i) => this.series[i].push(typeof event[field] === "number" ? event[field] : null));
    if (!this.pending) {
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }
  }

  draw() {
    const canvas = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 400, height = canvas.clientHeight || 160;
    if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
    if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
    const c = canvas.getContext("2d");
    c.setTransform(ratio, 0, 0, ratio, 0, 0);
    c.clearRect(0, 0, width, height);
    c.font = "12px system-ui, sans-serif";
    const pad = {left: 8, right: 8, top: 22, bottom: 18};
    const steps = this.steps;
    const first = steps[0] ?? 0, last = steps[steps.length - 1] ?? 1;
    const x = (step) => pad.left + ((step - first) / Math.max(last - first, 1)) * (width - pad.left - pad.right);
    c.strokeStyle = "#d5d9df";
    c.strokeRect(pad.left, pad.top, width - pad.left - pad.right, height - pad.top - pad.bottom);
    c.fillStyle = "#5b6472";
    c.fillText(steps.length ? `step ${first}` : "no data yet", pad.left, height - 4);
    if (steps.length) {
      const text = `step ${last}`;
      c.fillText(text, width - pad.right - c.measureText(text).width, height - 4);
    }
    let legendX = pad.left;
    this.fields.forEach((field, i) => {
      const values = this.series[i].filter((v) => v !== null);
      const color = COLORS[i % COLORS.length];
      const latest = values[values.length - 1];
      const label = `${field}${latest === undefined ? "" : ` ${latest.toFixed(4)}`}`;
      c.fillStyle = color;
      c.fillText(label, legendX, 14);
      legendX += c.measureText(label).width + 16;
      if (values.length < 1) return;
      let low = Math.min(...values), high = Math.max(...values);
      if (high - low < 1e-9) { low -= 0.5; high += 0.5; }
      const y = (v) => pad.top + (1 - (v - low) / (high - low)) * (height - pad.top - pad.bottom);
      c.strokeStyle = color;
      c.lineWidth = 1.5;
      c.beginPath();
      let started = false;
      this.series[i].forEach((v, k) => {
        if (v === null) return;
        if (started) c.lineTo(x(steps[k]), y(v));
        else { c.moveTo(x(steps[k]), y(v)); started = true; }
      });
      c.stroke();
    });
  }
}
