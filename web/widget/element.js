// element.js: <webgrad-model src="http://HOST/api/models/NAME" [input="canvas"] [device] [trust-code]>
//
//   el.ready            Promise<Model> (rejects on failure; the `error` event fires too)
//   el.model            the Model once ready (see model.js), el.info its info
//   await el.predict(x) same as model.predict(x); fires `prediction` (detail: the result)
//   events: ready (detail: info), error (detail: {message, kind}), prediction (detail: result)
//
// input="canvas" adds a drawing pad and probability bars that update as one draws: the
// digits model embeds as a working demo. Styles are adopted stylesheets in a shadow root,
// which a strict host CSP (style-src without 'unsafe-inline') does not block.
import {BARS_CSS, ProbabilityBars} from "./bars.js";
import {load, WidgetError} from "./model.js";
import {DrawingPad} from "./pad.js";

const CSS = `
:host { display: inline-block; font: 14px/1.4 system-ui, sans-serif; color: #1d232b; }
.box { display: flex; flex-wrap: wrap; gap: 0.8rem; align-items: flex-start; }
.pad { display: flex; flex-direction: column; gap: 0.3rem; }
canvas { width: 200px; height: 200px; border-radius: 6px; cursor: crosshair; }
.bars { width: 240px; }
.status { font-size: 12px; color: #5b6472; }
.status.error { color: #b42318; }
button { font: inherit; padding: 0.15rem 0.6rem; border: 1px solid #d5d9df; border-radius: 5px; background: #fff; }
.label { font-size: 1.6rem; font-weight: 700; min-height: 2.2rem; }
` + BARS_CSS;

let sheet = null;
function styles() {
  if (!sheet) {
    sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
  }
  return sheet;
}

export class WebgradModelElement extends HTMLElement {
  static get observedAttributes() { return ["src"]; }

  constructor() {
    super();
    this.model = null;
    this.info = null;
    this.ready = null;
    this.generation = 0;
    this.shadow = this.attachShadow({mode: "open"});
    this.shadow.adoptedStyleSheets = [styles()];
    this.status = document.createElement("div");
    this.status.className = "status";
    this.status.setAttribute("part", "status");
    this.shadow.append(this.status);
  }

  connectedCallback() {
    if (!this.ready || this.model?.disposed) this.start();  // first time, or moved (disconnect disposed it)
  }

  attributeChangedCallback(name, before, after) {
    if (this.isConnected && before !== after && this.ready) this.start();
  }

  disconnectedCallback() {
    this.model?.dispose();
  }

  start() {
    const generation = ++this.generation;
    this.model?.dispose();
    this.model = null;
    this.shadow.querySelector(".box")?.remove();  // the pad of a previous src
    this.setStatus("loading the model…");
    const src = this.getAttribute("src");
    const device = this.getAttribute("device") || "cpu";
    const timeoutMs = Number(this.getAttribute("timeout-ms")) || undefined;
    const loading = src ? load(src, {device, trustCode: this.hasAttribute("trust-code"), timeoutMs})
      : Promise.reject(new WidgetError("load", "<webgrad-model> needs a src attribute: the model's URL, "
        + "e.g. http://HOST/api/models/digits-mlp"));
    this.ready = loading.then((model) => {
      if (generation !== this.generation) { model.dispose(); return this.ready; }
      this.model = model;
      this.info = model.info;
      this.setStatus("");
      if (this.getAttribute("input") === "canvas") this.buildPad();
      this.dispatchEvent(new CustomEvent("ready", {detail: model.info}));
      return model;
    }, (error) => {
      if (generation === this.generation) this.fail(error);
      throw error;
    });
    this.ready.catch(() => {});  // reported through the `error` event; awaiting code still sees the rejection
  }

  setStatus(text, kind = "") {
    this.status.textContent = text;
    this.status.className = `status ${kind}`;
  }

  fail(error) {
    const message = error?.message || String(error);
    this.setStatus(message, "error");
    this.dispatchEvent(new CustomEvent("error", {detail: {message, kind: error?.kind || "load"}}));
  }

  /** model.predict(input) once ready; fires `prediction`, or `error` (and rejects) on failure. */
  async predict(input, options = {}) {
    const model = await this.ready;
    try {
      const result = await model.predict(input, options);
      this.dispatchEvent(new CustomEvent("prediction", {detail: result}));
      return result;
    } catch (error) {
      this.fail(error);
      throw error;
    }
  }

  buildPad() {
    const box = document.createElement("div");
    box.className = "box";
    const left = document.createElement("div");
    left.className = "pad";
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 280;
    canvas.setAttribute("part", "pad");
    canvas.setAttribute("aria-label", "drawing pad");
    const clear = document.createElement("button");
    clear.type = "button";
    clear.textContent = "Clear";
    left.append(canvas, clear);
    const right = document.createElement("div");
    right.className = "bars";
    const label = document.createElement("div");
    label.className = "label";
    label.setAttribute("part", "label");
    right.append(label);
    const labels = this.info.labels || Array.from({length: this.info.output_shape?.[1] || 0}, (_, i) => String(i));
    const bars = new ProbabilityBars(right, labels);
    box.append(left, right);
    this.shadow.insertBefore(box, this.status);
    let busy = false, again = false;
    const update = async (pad) => {
      if (busy) { again = true; return; }
      busy = true;
      try {
        const result = await this.predict(pad.canvas, {fit: "ink"});
        label.textContent = result.label ?? "";
        if (result.probabilities) bars.show(result.probabilities);
      } catch { /* shown by fail() */ }
      busy = false;
      if (again) { again = false; update(pad); }
    };
    this.pad = new DrawingPad(canvas, {onchange: update});
    clear.addEventListener("click", () => { this.pad.clear(); bars.clear(); label.textContent = ""; });
  }
}
