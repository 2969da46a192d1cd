// webgrad.js: run webgrad (PyTorch-style Python) in a Web Worker from any page.
//
//   import {boot} from "http://localhost:8000/webgrad.js";
//   const runtime = await boot({device: "auto", onProgress: (p) => console.log(p)});
//   runtime.device;            // "webgpu" or "cpu"
//   runtime.deviceReason;      // why that device
//   const {stdout, stderr, result} = await runtime.run("import webgrad\n1 + 1");
//   runtime.on("progress", (data) => ...);   // webgrad_progress({...}) from Python
//   await runtime.interrupt(); // stop a long run
//
// The worker (worker.js) loads Pyodide, numpy and the webgrad wheel from the
// server this module came from (`baseUrl`, derived from import.meta.url), so a
// page on another origin can embed it (the server sends CORS headers).
//
// Interrupts stop the run in progress (the oldest one not yet settled). Where the
// page is cross-origin isolated (COOP/COEP headers), a SharedArrayBuffer lets
// interrupt() raise KeyboardInterrupt inside the running Python, and the runtime
// keeps its state. Elsewhere, or when Python does not stop within
// `interruptGraceMs` (default 3000: it is stuck in a long C call or awaiting a
// promise; shorter would also restart through a long garbage collection, losing
// state for nothing), interrupt() terminates the worker and boots a fresh one: the run in
// progress (and any queued) rejects with KeyboardInterrupt, variables defined by
// earlier runs are gone, and a "restart" event fires. `runtime.interruptMode`
// says which comes first ("sharedarraybuffer" or "restart").

const SIGINT = 2;
// The shared interrupt control block: [signal read by Pyodide, id of the run it is aimed at].
const SIGNAL = 0;
const TARGET = 1;

/** A Python exception from runtime.run(): message is its last line, .traceback the whole. */
export class PythonError extends Error {
  constructor({message, traceback, pythonType, stdout, stderr}) {
    super(message);
    this.name = "PythonError";
    this.traceback = traceback;
    this.pythonType = pythonType;
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

function defaultBaseUrl() {
  return new URL(".", import.meta.url).href;
}

function startWorker(baseUrl) {
  const workerUrl = new URL("worker.js", baseUrl).href;
  if (new URL(workerUrl).origin === self.location.origin) {
    return {worker: new Worker(workerUrl), blobUrl: null};
  }
  // Workers must be same-origin with the page: a Blob-URL worker that imports the real one.
  const source = `importScripts(${JSON.stringify(workerUrl)});\n`;
  const blobUrl = URL.createObjectURL(new Blob([source], {type: "text/javascript"}));
  return {worker: new Worker(blobUrl), blobUrl};
}

export class Runtime {
  constructor(options = {}) {
    this.baseUrl = new URL(options.baseUrl || defaultBaseUrl(), self.location.href).href;
    if (!this.baseUrl.endsWith("/")) this.baseUrl += "/";
    this.requestedDevice = options.device || "auto";
    if (!["auto", "webgpu", "cpu"].includes(this.requestedDevice)) {
      throw new Error(`webgrad.boot: device must be "auto", "webgpu" or "cpu", not ${JSON.stringify(options.device)}`);
    }
    this.device = null;
    this.deviceReason = null;
    this.adapter = null;
    this.versions = null;
    this.timings = null;
    this.bootMs = null;
    this.interruptMode = null;
    this.interruptGraceMs = options.interruptGraceMs ?? 3000;
    this._listeners = {progress: new Set(), stdout: new Set(), stderr: new Set(), restart: new Set()};
    if (options.onProgress) this._listeners.progress.add(options.onProgress);
    this._pending = new Map();
    this._nextId = 1;
    this._worker = null;
  }

  /** Listen to "progress", "stdout", "stderr" or "restart"; returns a function that stops listening. */
  on(event, fn) {
    if (!this._listeners[event]) throw new Error(`webgrad: unknown event ${JSON.stringify(event)}`);
    this._listeners[event].add(fn);
    return () => this._listeners[event].delete(fn);
  }

  _emit(event, data) {
    for (const fn of this._listeners[event]) {
      try { fn(data); } catch (err) { console.error(`webgrad: a ${event} listener failed`, err); }
    }
  }

  async _start() {
    const started = performance.now();
    const shared = typeof SharedArrayBuffer !== "undefined" && self.crossOriginIsolated;
    this._control = shared ? new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT)) : null;
    const {worker, blobUrl} = startWorker(this.baseUrl);
    this._worker = worker;
    const ready = new Promise((resolve, reject) => { this._booting = {resolve, reject}; });
    worker.onmessage = (event) => this._receive(event.data);
    worker.onerror = (event) => {
      const error = new Error(`webgrad: the worker failed: ${event.message || "could not load worker.js"}`);
      if (this._booting) this._booting.reject(error);
      this._rejectAll(error);
    };
    worker.postMessage({type: "boot", baseUrl: this.baseUrl, device: this.requestedDevice,
                        control: this._control});
    try {
      await ready;
    } finally {
      if (blobUrl) URL.revokeObjectURL(blobUrl);
    }
    this.bootMs = Math.round(performance.now() - started);
    return this;
  }

  _receive(message) {
    switch (message.type) {
      case "progress":
        this._emit("progress", message.data);
        break;
      case "stdout":
      case "stderr":
        this._emit(message.type, message.text);
        break;
      case "ready":
        this.device = message.device;
        this.deviceReason = message.deviceReason;
        this.adapter = message.adapter;
        this.versions = message.versions;
        this.timings = message.timings;
        this.interruptMode = message.interrupt;
        this._booting.resolve();
        this._booting = null;
        break;
      case "result": {
        const pending = this._take(message.id);
        if (pending) pending.resolve({stdout: message.stdout, stderr: message.stderr, result: message.result});
        break;
      }
      case "error": {
        const error = new PythonError(message);
        if (message.id === null && this._booting) {
          error.message = `webgrad: boot failed: ${message.message}`;
          this._booting.reject(error);
          this._booting = null;
        } else {
          const pending = this._take(message.id);
          if (pending) pending.reject(error);
        }
        break;
      }
      default:
        console.warn("webgrad: unknown message from the worker", message);
    }
  }

  _take(id) {
    const pending = this._pending.get(id);
    this._pending.delete(id);
    if (pending) pending.settle();
    return pending;
  }

  _rejectAll(error) {
    for (const pending of this._pending.values()) {
      pending.reject(error);
      pending.settle();
    }
    this._pending.clear();
  }

  /** Run Python source; resolves {stdout, stderr, result}, rejects with a PythonError. */
  run(code) {
    if (!this._worker) return Promise.reject(new Error("webgrad: the runtime was terminated"));
    const id = this._nextId++;
    let settle;
    const settled = new Promise((resolve) => { settle = resolve; });
    return new Promise((resolve, reject) => {
      this._pending.set(id, {resolve, reject, settle, settled});
      this._worker.postMessage({type: "run", id, code: String(code)});
    });
  }

  /** Stop the run in progress. Resolves once the runtime accepts new runs. */
  async interrupt() {
    if (!this._worker || this._pending.size === 0) return;
    const target = Math.min(...this._pending.keys());  // runs execute in order: the oldest is running
    if (this._control) {
      // Aim first, then signal: the worker drops a signal aimed at another run (one that already ended).
      Atomics.store(this._control, TARGET, target);
      Atomics.store(this._control, SIGNAL, SIGINT);
      const timer = new Promise((resolve) => setTimeout(() => resolve(false), this.interruptGraceMs));
      const stopped = await Promise.race([this._pending.get(target).settled.then(() => true), timer]);
      if (stopped) return;
    }
    await this._restart("interrupt");
  }

  // Terminate the worker and boot a fresh one (documented at the top of this file).
  async _restart(reason) {
    const error = new Error("KeyboardInterrupt: the run was stopped (the worker restarted, so earlier " +
                            "variables are gone" + (this._control ? ")" :
                            "; serve the page with COOP/COEP headers to keep them)"));
    error.pythonType = "KeyboardInterrupt";
    this._worker.terminate();
    this._worker = null;
    this._rejectAll(error);
    await this._start();
    this._emit("restart", {reason});
  }

  /** Stop the worker for good. */
  terminate() {
    if (this._worker) this._worker.terminate();
    this._worker = null;
    this._rejectAll(new Error("webgrad: the runtime was terminated"));
  }
}

/** Start a runtime: options {baseUrl, device: "auto"|"webgpu"|"cpu", onProgress}. */
export async function boot(options = {}) {
  const runtime = new Runtime(options);
  await runtime._start();
  return runtime;
}
