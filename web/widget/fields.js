// fields.js: number fields for a model that takes a vector of N floats (input kind "vector"),
// a Predict button, and the answer: the most likely class with probability bars for a
// classifier, else the output values. Enter in a field predicts too.
import {ProbabilityBars} from "./bars.js";

/** More values than this get one text box (numbers separated by commas or spaces), not a field each. */
const MAX_FIELDS = 32;

/** A short text for a prediction: "class 1 (87.0%)" or "0.731" / "0.731, -0.2, ...". */
export function describe(result) {
  if (result.label !== undefined) return `${result.label} (${(100 * result.probabilities[result.index]).toFixed(1)}%)`;
  const values = Array.from(result.outputs.slice(0, 8), (v) => Number(v.toPrecision(4)));
  return values.join(", ") + (result.outputs.length > 8 ? ", …" : "");
}

export class NumberFields {
  /**
   * @param {HTMLElement} box  where the fields go
   * @param {{size: number, names?: string[] | null}} record  the model's input record
   * @param {string[] | null} labels  class names (probability bars are shown for a classifier)
   * @param {(values: Float32Array) => Promise<any>} predict
   */
  constructor(box, record, labels, predict) {
    this.size = record.size;
    this.predict = predict;
    const form = document.createElement("form");
    form.className = "fields";
    form.setAttribute("part", "fields");
    form.noValidate = true;
    this.inputs = [];
    if (this.size <= MAX_FIELDS) {
      for (let i = 0; i < this.size; i++) {
        const field = document.createElement("label");
        const name = document.createElement("span");
        name.textContent = record.names?.[i] ?? `x${i + 1}`;
        const input = document.createElement("input");
        input.type = "number";
        input.step = "any";
        input.value = "0";
        input.setAttribute("part", "field");
        field.append(name, input);
        form.append(field);
        this.inputs.push(input);
      }
    } else {
      const field = document.createElement("label");
      field.className = "wide";
      const name = document.createElement("span");
      name.textContent = `${this.size} numbers, separated by commas or spaces`;
      this.text = document.createElement("textarea");
      this.text.rows = 3;
      this.text.setAttribute("part", "field");
      this.text.value = Array(this.size).fill("0").join(", ");
      field.append(name, this.text);
      form.append(field);
    }
    const go = document.createElement("button");
    go.type = "submit";
    go.textContent = "Predict";
    go.setAttribute("part", "predict");
    form.append(go);
    this.output = document.createElement("output");
    this.output.className = "answer";
    this.output.setAttribute("part", "label");
    this.output.setAttribute("aria-live", "polite");
    const bars = document.createElement("div");
    bars.className = "bars";
    this.bars = labels && labels.length > 1 ? new ProbabilityBars(bars, labels) : null;
    form.addEventListener("submit", (event) => { event.preventDefault(); this.run(); });
    box.append(form, this.output, bars);
  }

  /** The typed numbers, or null (and a message in the output) when one is not a number. */
  values() {
    const texts = this.text ? this.text.value.split(/[\s,]+/).filter(Boolean) : this.inputs.map((i) => i.value);
    const values = texts.map((t) => (t.trim() === "" ? NaN : Number(t)));
    const bad = values.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) {
      this.output.textContent = this.text ? `"${texts[bad]}" is not a number` : `x${bad + 1} is not a number`;
      this.inputs[bad]?.focus();
      return null;
    }
    if (values.length !== this.size) {
      this.output.textContent = `the model takes ${this.size} numbers; found ${values.length}`;
      return null;
    }
    return Float32Array.from(values);
  }

  async run() {
    const values = this.values();
    if (!values) return;
    this.output.textContent = "…";
    try {
      const result = await this.predict(values);
      this.output.textContent = describe(result);
      if (this.bars && result.probabilities) this.bars.show(result.probabilities);
    } catch {
      this.output.textContent = "";  // the element shows the error under the widget
    }
  }
}

export const FIELDS_CSS = `
.fields { display: flex; flex-wrap: wrap; gap: 0.5rem 0.8rem; align-items: flex-end; max-width: 100%; }
.fields label { display: flex; flex-direction: column; gap: 0.15rem; font-size: 12px; color: #5b6472; }
.fields label.wide { flex-basis: 100%; }
.fields input { width: 7ch; font: inherit; padding: 0.2rem 0.3rem; border: 1px solid #d5d9df; border-radius: 5px; }
.fields textarea { font: inherit; width: 100%; box-sizing: border-box; }
.answer { display: block; font-size: 1.3rem; font-weight: 700; min-height: 1.9rem; }
`;
