// element.js: <webgrad-model src="http://HOST/api/models/NAME" [input="..."] [device] [trust-code]>
//
//   el.ready            Promise<Model> (rejects on failure; the `error` event fires too)
//   el.model            the Model once ready (see model.js), el.info its info
//   await el.predict(x) same as model.predict(x); fires `prediction` (detail: the result)
//   await el.generate(prompt, {length, temperature})  a language model's text; fires `prediction`
//   events: ready (detail: info), error (detail: {message, kind}), prediction (detail: the result)
//
// The element shows a UI that fits the model's recorded input (info.input, see core/store.py):
//   image  -> input="canvas": a drawing pad with probability bars that update as one draws
//   vector -> input="fields": a number field per value, Predict, the answer
//   points -> input="plane":  a plane colored by the model's answer (or its curve), click to ask
//   tokens -> input="text":   a prompt, temperature and length, Generate, the text written
// An `input` attribute picks one of these instead; input="none" shows nothing (JS use only).
// Styles are adopted stylesheets in a shadow root, which a strict host CSP (style-src
// without 'unsafe-inline') does not block.
import {BARS_CSS, ProbabilityBars} from "./bars.js";
import {FIELDS_CSS, NumberFields} from "./fields.js";
import {load, WidgetError} from "./model.js";
import {DrawingPad} from "./pad.js";
import {ClickPlane, PLANE_CSS} from "./plane.js";
import {TEXT_CSS, TextGenerator} from "./text.js";

/** The UI for each recorded input kind (the `input` attribute's values, "none" aside). */
const UI_FOR_KIND = {image: "canvas", vector: "fields", points: "plane", tokens: "text"};
const UIS = ["canvas", "fields", "plane", "text", "none"];

const CSS = `
:host { display: inline-block; max-width: 100%; font: 14px/1.4 system-ui, sans-serif; color: #1d232b; }
.box { display: flex; flex-wrap: wrap; gap: 0.8rem; align-items: flex-start; max-width: 100%; }
.box.text { width: 36rem; }
.pad { display: flex; flex-direction: column; gap: 0.3rem; max-width: 100%; }
.pad canvas { width: 200px; height: 200px; max-width: 100%; border-radius: 6px; cursor: crosshair; }
:focus-visible { outline: 2px solid #1f6feb; outline-offset: 2px; }
.bars { width: 240px; max-width: 100%; }
.status { font-size: 12px; color: #5b6472; }
.status.error { color: #b42318; }
button { font: inherit; padding: 0.15rem 0.6rem; border: 1px solid #d5d9df; border-radius: 5px; background: #fff; }
.label { font-size: 1.6rem; font-weight: 700; min-height: 2.2rem; }
` + BARS_CSS + FIELDS_CSS + PLANE_CSS + TEXT_CSS;

let sheet = null;
function styles() {
  if (!sheet) {
    sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
  }
  return sheet;
}

export class WebgradModelElement extends HTMLElement {
  static get observedAttributes() { return ["src", "input", "trust-code", "device"]; }

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
    if (!this.isConnected || before === after || !this.ready) return;
    if (name !== "input") {
      this.start();
    } else if (this.model) {  // the same model, another UI: no reload
      this.shadow.querySelector(".box")?.remove();
      this.setStatus("");
      this.buildUI(this.model);
    }
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
      this.buildUI(model);
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
  predict(input, options = {}) {
    return this.answer((model) => model.predict(input, options));
  }

  /** A language model's continuation of `prompt` (see Model.generate); fires `prediction`. */
  generate(prompt, options = {}) {
    return this.answer((model) => model.generate(prompt, options));
  }

  /** Ask the model once ready: a result fires `prediction`, a failure `error` (and rejects). */
  async answer(ask) {
    const model = await this.ready;
    try {
      const result = await ask(model);
      if (this.status.classList.contains("error")) this.setStatus("");  // an earlier failure is over
      this.dispatchEvent(new CustomEvent("prediction", {detail: result}));
      return result;
    } catch (error) {
      this.fail(error);
      throw error;
    }
  }

  /** The UI the `input` attribute asks for, else the one that fits the model's recorded input. */
  buildUI(model) {
    const asked = this.getAttribute("input");
    const input = model.input;
    const ui = asked ?? UI_FOR_KIND[input?.kind] ?? "none";
    if (!UIS.includes(ui)) {
      this.fail(new WidgetError("input", `input="${asked}" is not one of ${UIS.join(", ")}; leave it out to get `
        + "the UI that fits the model"));
      return;
    }
    if (ui === "none") return;
    const box = document.createElement("div");
    box.className = `box ${ui}`;
    this.shadow.insertBefore(box, this.status);
    const labels = this.info.labels || null;
    const shape = this.info.input_shape || [];
    if (ui === "canvas") {
      if (!model.imageLayout()) return this.mismatch(box, ui, "an image");
      this.buildPad(box);
    } else if (ui === "fields") {
      const size = input?.kind === "vector" ? input.size : shape.length === 2 ? shape[1] : 0;
      if (!size) return this.mismatch(box, ui, "a vector of numbers");
      this.fields = new NumberFields(box, {size, names: input?.names ?? null}, labels,
        (values) => this.predict(values));
    } else if (ui === "plane") {
      const dims = input?.kind === "points" ? input.dims : shape.length === 2 && shape[1] <= 2 ? shape[1] : 0;
      if (!dims) return this.mismatch(box, ui, "one or two numbers");
      const record = input?.kind === "points" ? input : {dims, x_range: [-1, 1], y_range: dims === 2 ? [-1, 1] : null};
      this.plane = new ClickPlane(box, record, labels, {
        predict: (points) => this.predict(points),
        evaluate: (points) => model.predict(points)});
      this.plane.drawModel().catch((error) => this.fail(error));
    } else {
      if (!model.takesIntegers() && input?.kind !== "tokens") return this.mismatch(box, ui, "token ids");
      this.generator = new TextGenerator(box, input?.kind === "tokens" ? input : {}, (prompt, options) =>
        this.generate(prompt, options));
    }
  }

  mismatch(box, ui, what) {
    box.remove();
    const kind = this.model.input?.kind;
    this.fail(new WidgetError("input", `input="${ui}" needs a model that takes ${what}; this one takes `
      + `${kind ? `${kind} input` : `input of shape [${this.info.input_shape}]`}`
      + (kind ? `: leave input out to get its own UI ("${UI_FOR_KIND[kind]}")` : "")));
  }

  buildPad(box) {
    const left = document.createElement("div");
    left.className = "pad";
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 280;
    canvas.setAttribute("part", "pad");
    canvas.setAttribute("aria-label", "drawing pad: draw with the mouse, a finger, or the arrow keys "
      + "(Shift+arrow moves the pen without drawing)");
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
