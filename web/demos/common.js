// common.js: what every demo page shares: boot the runtime (device from ?device=, shown in
// the header), load the demo's Python file, run training with live progress and Stop, and
// the "Save to store" / "Embed" actions.
//
// The Python is the file `python demos/NAME.py` runs: the server serves it at
// /demos/py/NAME.py; the page writes it into the worker's working directory and imports it
// as a module (the one run of Python source), then calls its functions by name with data
// (runtime.call: JSON-able values and typed arrays, never Python source built from what the
// user typed or drew). The model lives in the module (its `current`, made by its `start`), so
// every demo module has start(...), train(steps, ...) (progress events, obeys Stop) and
// push(name); see each demo's docstring.
//
// A page is in one state at a time, shown by its buttons and status line:
//   "starting"  booting Python, importing the file and running the page's setup (the first
//               picture is drawn before the page says "ready")
//   "idle"      Train enabled; the status says "ready", "done at step N of M", "stopped at …"
//   "busy"      a short job (rebuild the model, reset, sample, save): Train disabled
//   "training"  a run: Stop enabled, the status counts the run's steps ("step k of M")
//   "failed"    Python could not start or the setup failed; the status says why
// Every action checks the state first, so a click can never start a job the page then
// ignores (a Train click used to land while the page was still setting up, and vanish).
import {boot, DEVICES} from "../webgrad.js";
import {embedSnippet, engineNote} from "../widget/snippet.js";

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

/** "2026-12-01T23:14:40.123+00:00" -> "2026-12-01 23:14 UTC" (the store's times are UTC). */
function shortDate(iso) {
  const match = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)/.exec(String(iso || ""));
  return match ? `${match[1]} ${match[2]} UTC` : String(iso || "at an unknown time");
}

export class Demo {
  /** @param {string} module  the demo file's name in demos/, without .py */
  constructor(module) {
    this.module = module;
    this.runtime = null;
    this.state = "starting";
    this.setup = null;  // the page's async setup: run at start and again after the worker restarted
    this.lost = false;  // the worker restarted (a Stop it did not obey): its Python state is gone
    this.fresh = true;  // true: no trained model in the worker (never trained, or the worker restarted)
    this.saved = null;
    this.stopping = null;  // the Stop in progress (runtime.interrupt()'s promise)
    this.controls = [];  // the page's own inputs, enabled only while idle
    this.modelControls = [];  // and those that also need a trained model (Save, Embed, Sample)
  }

  get running() { return this.state === "training"; }
  get idle() { return this.state === "idle"; }

  setStatus(text, kind = "") {
    $("status").textContent = text;
    $("status").className = `status ${kind}`;
  }

  setState(state) {
    this.state = state;
    this.buttons();
  }

  /**
   * Boot, load the demo's file, run `setup` (which draws the page's first picture), then say
   * "ready". `setup` runs again whenever the worker had to restart.
   * @param {() => Promise<void>} [setup]
   */
  async start(setup) {
    this.setup = setup || null;
    this.setState("starting");
    this.setStatus("starting Python…");
    const device = requestedDevice();
    try {
      this.runtime = await boot({device, onBoot: ({message}) => this.setStatus(message || "starting…")});
      $("device").textContent = this.runtime.device;
      $("device").title = this.runtime.deviceReason || "";
      this.runtime.on("restart", () => this.restarted());
      this.setStatus(`loading demos/${this.module}.py…`);
      await this.prepare();
    } catch (error) {
      this.setStatus(error.message, "error");
      this.setState("failed");
      console.warn(error.traceback || error);
      return;
    }
    this.setStatus("ready");
    this.setState("idle");
  }

  /**
   * The worker was replaced (a Stop that Python did not obey in time): its variables are gone.
   * The stopped run loads the demo again before the page goes idle (see train); were the page
   * idle, load it now.
   */
  restarted() {
    this.lost = true;
    this.fresh = true;
    const after = `${$("status").textContent} (Python restarted: the model starts over)`;
    if (this.idle) this.task("Python restarted: loading the demo again…", async () => {}, after);  // task loads it
  }

  /** Import the demo and run its setup again in the new worker, keeping what the status said. */
  async reload() {
    const said = $("status").textContent;
    this.setStatus("Python restarted: loading the demo again…");
    try {
      await this.prepare();
      this.setStatus(`${said} (Python restarted: the model starts over)`, "stopped");
    } catch (error) {
      this.setStatus(`Python restarted and the demo could not load again: ${error.message}`, "error");
    }
  }

  /** Write the demo's file into the worker, import it (once: later calls name its functions;
   * runtime.call admits a module imported from the working folder) and run the page's setup. */
  async prepare() {
    const response = await fetch(`/demos/py/${this.module}.py`);
    if (!response.ok) throw new Error(`/demos/py/${this.module}.py answered ${response.status}`);
    await this.runtime.files.write(`${this.module}.py`, await response.text());
    await this.runtime.run(`import os, sys\nif os.getcwd() not in sys.path:\n    sys.path.insert(0, os.getcwd())\n`
      + `import ${this.module}`, {filename: `<${this.module} page>`});
    this.lost = false;
    if (this.setup) await this.setup();
  }

  /**
   * Call the demo module's function `fn` with `args` (JSON-able values and typed arrays; the
   * ArrayBuffers in `transfer` move to the worker); resolves to its return value.
   * @param {string} fn  @param {any[]} [args]  @param {{transfer?: ArrayBuffer[]}} [options]
   */
  call(fn, args = [], options = {}) {
    return this.runtime.call(this.module, fn, args, options);
  }

  /**
   * Run a short job `fn` while idle (Train disabled meanwhile), showing `label`, then `after`
   * (default: the status from before); errors go to the status line. Resolves to fn's value,
   * or undefined if the page was not idle or fn failed.
   * @template T
   * @param {string} label  @param {() => Promise<T>} fn  @param {string | null} [after]
   * @returns {Promise<T | undefined>}
   */
  async task(label, fn, after = null) {
    if (!this.idle) return undefined;
    this.setState("busy");
    const before = {text: $("status").textContent, kind: $("status").className.replace(/^status ?/, "")};
    this.setStatus(label);
    try {
      if (this.lost) await this.prepare();
      const value = await fn();
      if (after === null) this.setStatus(before.text, before.kind);
      else this.setStatus(after);
      return value;
    } catch (error) {
      this.setStatus(error.message, "error");
      console.warn(error.traceback || error);
      return undefined;
    } finally {
      this.setState("idle");
    }
  }

  /**
   * Run `steps` training steps: calls the module's train(steps, ...args), which sends progress
   * events (they carry the model's step and total since it was built); `before` runs first,
   * inside the run (e.g. send the points). Resolves true if it finished, false if stopped,
   * failed, or the page was not idle.
   * @param {{steps: number, args?: any[], before?: () => Promise<any>, onProgress: (event: any) => void,
   *          label?: string}} run
   */
  async train({steps, args = [], before, onProgress, label = "training"}) {
    if (!this.idle) return false;
    this.setState("training");  // at once, in the click's own task: the page answers every click
    const compiling = this.runtime.device === "webgpu" ? " (compiling the GPU kernels)" : "";
    this.setStatus(`${label}… first step${compiling}`);
    let done = 0, total = 0;  // this run's steps so far; the model's steps in all
    const off = this.runtime.on("progress", (event) => {
      if (typeof event.step !== "number") return;
      total = event.step;
      done = typeof event.total === "number" ? event.step - (event.total - steps) : event.step;
      this.setStatus(`${label}… step ${done} of ${steps}`
        + (typeof event.loss === "number" ? `, loss ${event.loss.toFixed(4)}` : ""));
      onProgress(event);
    });
    const inAll = () => (total > done ? ` (${total} steps in all)` : "");
    try {
      if (this.lost) await this.prepare();
      if (before) await before();
      await this.call("train", [steps, ...args]);
      this.fresh = false;
      this.setStatus(`done at step ${done} of ${steps}${inAll()}`);
      return true;
    } catch (error) {
      if (error.pythonType === "KeyboardInterrupt") {
        this.setStatus(done ? `stopped at step ${done} of ${steps}${inAll()}` : "stopped", "stopped");
        if (done && !this.lost) this.fresh = false;  // the worker kept the model trained so far
        return false;
      }
      this.setStatus(error.message, "error");
      console.warn(error.traceback || error);
      return false;
    } finally {
      off();
      await this.stopping;  // a Stop that had to restart the worker: wait until the new one is up
      if (this.lost) await this.reload();
      this.setState("idle");
    }
  }

  async stop() {
    if (!this.running || this.stopping) return;
    this.stopping = this.runtime.interrupt();
    try {
      await this.stopping;
    } finally {
      this.stopping = null;
    }
  }

  buttons() {
    $("train").disabled = !this.idle;
    $("stop").disabled = !this.running;
    for (const control of this.controls) control.disabled = !this.idle;
    for (const control of this.modelControls) control.disabled = !this.idle || this.fresh;
  }

  /** Wire Stop, Save to store and Embed (the module's push(name) saves the model). */
  wire() {
    this.modelControls.push($("save"), $("embed"));
    $("stop").addEventListener("click", () => this.stop());
    $("save").addEventListener("click", () => this.task("saving…", () => this.save()));
    $("embed").addEventListener("click", () => this.task("saving…", () => this.embed()));
    this.buttons();
  }

  /** The model name typed, or null (and the reason shown) if it is not a valid name. */
  modelName() {
    const name = $("model-name").value.trim();
    if (/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name) && !name.includes("..")) return name;
    $("saved").textContent = "a name is 1-64 letters, digits, '_', '.' or '-' (starting with a letter or digit)";
    return null;
  }

  /** The store's record of `name` (GET /api/models/NAME), or null when there is none. */
  async record(name) {
    const response = await fetch(`/api/models/${encodeURIComponent(name)}`, {cache: "no-store"});
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(`/api/models/${name} answered ${response.status}`);
    return response.json();
  }

  /**
   * Push the model as the typed name; a model already stored under it (by this page or any
   * other: the playground, another demo) is replaced only after the user agrees. Resolves to
   * true if saved.
   */
  async save() {
    const name = this.modelName();
    if (!name) return false;
    $("saved").textContent = "saving…";
    try {
      const old = await this.record(name);
      if (old && this.saved !== name
          && !window.confirm(`A model named "${name}" is in the store: replace revision ${old.revision} `
            + `saved ${shortDate(old.updated)}?`)) {
        $("saved").textContent = `not saved: "${name}" is taken (choose another name)`;
        return false;
      }
      const info = await this.call("push", [name]);
      this.saved = name;
      $("saved").textContent = `saved as ${name}, revision ${info?.revision ?? "?"} (/api/models/${name})`;
      return true;
    } catch (error) {
      $("saved").textContent = `not saved: ${error.message}`;
      return false;
    }
  }

  /** Save (unless this page saved this name already), then show the widget snippet for it. */
  async embed() {
    const name = this.modelName();
    if (!name) return;
    if (this.saved !== name && !(await this.save())) return;
    const record = await this.record(name);
    if (!record) throw new Error(`the store has no model named ${name} any more: save it again`);
    $("snippet").hidden = false;
    $("snippet").textContent = embedSnippet({origin: location.origin, name, info: record});
    $("snippet-engine").hidden = false;
    $("snippet-engine").textContent = engineNote(record);
  }
}

/**
 * Map data coordinates in [-extent, extent]^2 to a size x size canvas, with `pad` pixels kept
 * free on every side so points drawn at the edge of the range stay whole.
 * @param {number} size  @param {number} extent  @param {number} pad
 */
export function plotScale(size, extent, pad) {
  const inner = size - 2 * pad;
  return {
    x: (x) => pad + ((x + extent) / (2 * extent)) * inner,
    y: (y) => pad + ((extent - y) / (2 * extent)) * inner,
    /** canvas pixel -> data coordinate (the inverse of x / y) */
    fromX: (px) => ((px - pad) / inner) * 2 * extent - extent,
    fromY: (py) => extent - ((py - pad) / inner) * 2 * extent,
  };
}
