// common.js: what every demo page shares: boot the runtime (device from ?device=, shown in
// the header), load the demo's Python file, run training with live progress and Stop, and
// the "Save to store" / "Embed" actions.
//
// The Python is the file `python demos/NAME.py` runs: the server serves it at
// /demos/py/NAME.py; the page writes it into the worker's working directory and imports it
// as a module, then calls its functions step by step (see each demo's docstring).
import {boot, DEVICES} from "../webgrad.js";

export const $ = (id) => /** @type {any} */ (document.getElementById(id));

function warn(text) {
  const box = $("warning");
  if (!box) return;
  box.hidden = false;
  box.textContent = text;
}

function requestedDevice() {
  const asked = new URLSearchParams(location.search).get("device");
  if (!asked) return "auto";
  if (DEVICES.includes(asked)) return asked;
  warn(`?device=${asked} is not a device (choose ${DEVICES.join(", ")}): using auto.`);
  return "auto";
}

export class Demo {
  /** @param {string} module  the demo file's name in demos/, without .py */
  constructor(module) {
    this.module = module;
    this.runtime = null;
    this.running = false;
    this.lastStep = null;
    this.fresh = true;  // true: no trained model in the worker (never trained, or the worker restarted)
    this.saved = null;
    this.runs = 0;  // training runs ended (finished, stopped or failed)
  }

  setStatus(text, kind = "") {
    $("status").textContent = text;
    $("status").className = `status ${kind}`;
  }

  /** Boot, load the demo's file; resolves when the page can train. */
  async start() {
    this.setStatus("starting Python…");
    const device = requestedDevice();
    try {
      this.runtime = await boot({device, onBoot: ({message}) => this.setStatus(message || "starting…")});
    } catch (error) {
      this.setStatus(error.message, "error");
      throw error;
    }
    $("device").textContent = this.runtime.device;
    $("device").title = this.runtime.deviceReason || "";
    this.runtime.on("restart", () => { this.fresh = true; this.loaded = null; });
    await this.load();
    this.setStatus("ready");
    this.buttons();
  }

  async load() {
    if (!this.loaded) {
      this.loaded = (async () => {
        const response = await fetch(`/demos/py/${this.module}.py`);
        if (!response.ok) throw new Error(`/demos/py/${this.module}.py answered ${response.status}`);
        await this.runtime.files.write(`${this.module}.py`, await response.text());
        await this.runtime.run(`import os, sys\nif os.getcwd() not in sys.path:\n    sys.path.insert(0, os.getcwd())\n`
          + `import ${this.module}`, {filename: `<${this.module} page>`});
      })();
      this.loaded.catch(() => { this.loaded = null; });
    }
    return this.loaded;
  }

  /** Run Python (after the demo's module is imported); resolves to the last expression's value. */
  async call(code) {
    await this.load();
    const {result} = await this.runtime.run(code, {filename: `<${this.module} page>`});
    return result;
  }

  /**
   * Run a training call (Python code that passes `webgrad_progress` as on_progress) with the
   * Train/Stop buttons managed; onProgress gets each event. Resolves true if it finished,
   * false if stopped.
   */
  async train(code, onProgress) {
    this.running = true;
    this.buttons();
    this.lastStep = null;
    const off = this.runtime.on("progress", (event) => {
      if (typeof event.step === "number") this.lastStep = event.step;
      this.setStatus(`training… step ${event.step}${event.total ? ` / ${event.total}` : ""}`
        + (typeof event.loss === "number" ? `, loss ${event.loss.toFixed(4)}` : ""));
      onProgress(event);
    });
    try {
      await this.call(code);
      this.fresh = false;
      this.setStatus(`done${this.lastStep !== null ? ` at step ${this.lastStep}` : ""}`);
      return true;
    } catch (error) {
      if (error.pythonType === "KeyboardInterrupt") {
        this.setStatus(this.lastStep !== null ? `stopped at step ${this.lastStep}` : "stopped", "stopped");
        if (this.lastStep !== null && this.loaded) this.fresh = false;  // the worker kept the model
        return false;
      }
      this.setStatus(error.message, "error");
      console.warn(error.traceback || error);
      return false;
    } finally {
      off();
      this.runs += 1;
      this.running = false;
      this.buttons();
    }
  }

  async stop() {
    if (this.running) await this.runtime.interrupt();
  }

  buttons() {
    $("train").disabled = this.running || !this.loaded;
    $("stop").disabled = !this.running;
    for (const id of ["save", "embed"]) if ($(id)) $(id).disabled = this.running || this.fresh;
  }

  /** Wire Stop, Save to store and Embed; `push(name)` is Python code that pushes the model. */
  wire({push}) {
    $("stop").addEventListener("click", () => this.stop());
    $("save")?.addEventListener("click", () => this.save(push));
    $("embed")?.addEventListener("click", async () => {
      const name = $("model-name").value.trim();
      if (this.saved !== name && !(await this.save(push))) return;
      const origin = location.origin;
      const attrs = $("embed").dataset.attrs ? ` ${$("embed").dataset.attrs}` : "";  // e.g. input="canvas"
      $("snippet").hidden = false;
      $("snippet").textContent = `<script type="module" src="${origin}/widget.js"></script>\n`
        + `<webgrad-model src="${origin}/api/models/${name}"${attrs}></webgrad-model>`;
    });
    this.buttons();
  }

  async save(push) {
    const name = $("model-name").value.trim();
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
      $("saved").textContent = "a name is 1-64 letters, digits, '_', '.' or '-'";
      return false;
    }
    $("saved").textContent = "saving…";
    try {
      await this.call(push(name));
      this.saved = name;
      $("saved").textContent = `saved as ${name} (/api/models/${name})`;
      return true;
    } catch (error) {
      $("saved").textContent = `not saved: ${error.message}`;
      return false;
    }
  }
}

/** A number, string or list of them as a Python literal (their JSON is valid Python). */
export function py(value) {
  const ok = (v) => (typeof v === "number" && Number.isFinite(v)) || typeof v === "string";
  if (!(ok(value) || (Array.isArray(value) && value.every(ok)))) throw new TypeError(`py(): cannot pass ${value}`);
  return JSON.stringify(value);
}
