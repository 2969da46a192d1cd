// charts.js: live charts of webgrad_progress({...}) calls. Every numeric field except
// step/total gets a small uPlot chart of its values against `step` (the call's index when
// there is no step). Events only push into arrays; the charts redraw at most once per
// animation frame, so 100,000 points stay smooth.
import uPlot from "uplot";

const SKIP = new Set(["step", "total", "fraction", "epoch_total"]);

export class Charts {
  constructor(element) {
    this.element = element;
    this.records = [];   // every event, for the CSV
    this.series = new Map();  // field -> {xs, ys, chart, dirty}
    this.frame = 0;
    this.width = 300;
    new ResizeObserver(() => this.resize()).observe(element);
  }

  get points() {
    let total = 0;
    for (const {xs} of this.series.values()) total += xs.length;
    return total;
  }

  reset() {
    for (const {chart} of this.series.values()) chart.destroy();
    this.series.clear();
    this.records = [];
    this.element.textContent = "";
  }

  add(data) {
    if (!data || typeof data !== "object") return;
    this.records.push(data);
    const x = typeof data.step === "number" ? data.step : this.records.length;
    for (const [field, value] of Object.entries(data)) {
      if (SKIP.has(field) || typeof value !== "number" || !Number.isFinite(value)) continue;
      let entry = this.series.get(field);
      if (!entry) entry = this._create(field);
      entry.xs.push(x);
      entry.ys.push(value);
      entry.dirty = true;
    }
    if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
  }

  draw() {
    this.frame = 0;
    for (const entry of this.series.values()) {
      if (!entry.dirty) continue;
      entry.dirty = false;
      entry.chart.setData([entry.xs, entry.ys]);
      entry.label.textContent = `${entry.field}: ${format(entry.ys[entry.ys.length - 1])}`;
    }
  }

  _create(field) {
    const box = document.createElement("figure");
    box.className = "chart";
    box.dataset.field = field;
    const label = document.createElement("figcaption");
    label.textContent = field;
    box.append(label);
    this.element.append(box);
    const colors = ["#1f6feb", "#d97706", "#059669", "#9333ea", "#dc2626", "#0891b2"];
    const color = colors[this.series.size % colors.length];
    const chart = new uPlot({
      width: this._chartWidth(), height: 150, legend: {show: false}, cursor: {drag: {x: false, y: false}},
      scales: {x: {time: false}},
      axes: [{size: 28}, {size: 48}],
      series: [{label: "step"}, {label: field, stroke: color, width: 1.5, points: {show: false}}],
    }, [[], []], box);
    const entry = {field, xs: [], ys: [], chart, label, dirty: false};
    this.series.set(field, entry);
    return entry;
  }

  _chartWidth() {
    const width = this.element.clientWidth || 300;
    return width < 560 ? width - 4 : Math.floor(width / 2) - 8;
  }

  resize() {
    const width = this._chartWidth();
    if (width === this.width) return;
    this.width = width;
    for (const {chart} of this.series.values()) chart.setSize({width, height: 150});
  }

  /** Every event as CSV: one column per field seen, one row per webgrad_progress call. */
  csv() {
    const fields = [];
    for (const record of this.records) {
      for (const key of Object.keys(record)) if (!fields.includes(key)) fields.push(key);
    }
    const cell = (value) => {
      if (value === undefined || value === null) return "";
      const text = typeof value === "object" ? JSON.stringify(value) : String(value);
      return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
    };
    const rows = [fields.map(cell).join(",")];
    for (const record of this.records) rows.push(fields.map((f) => cell(record[f])).join(","));
    return rows.join("\n") + "\n";
  }
}

function format(value) {
  return Math.abs(value) >= 1e4 || (Math.abs(value) < 1e-3 && value !== 0) ? value.toExponential(3) : value.toFixed(4);
}
