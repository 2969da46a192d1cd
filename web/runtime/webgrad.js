// webgrad.js: run webgrad (PyTorch-style Python) in a Web Worker from any page.
// Also served as /webgrad.js (a re-export), the URL other sites import.
//
//   import {boot} from "http://HOST/webgrad.js";
//   const runtime = await boot({device: "auto", onBoot: (stage) => ..., onProgress: (data) => ...});
//   runtime.device, runtime.deviceReason  // "webgpu" or "cpu", and why
//   runtime.warnings                      // e.g. a bad `device` that fell back to "auto"
//   runtime.timings, runtime.pythonStart  // when each boot step ended (ms); "snapshot" when
//                                         // Python was restored from the server's memory snapshot
//   runtime.numpyFrom                     // "image" (numpy's prepared files) or "wheel"
//   runtime.imagesFrom                    // where each image came from: {snapshot, numpy, webgrad}:
//                                         // "cache" (kept by an earlier visit) or "network"
//   const {stdout, stderr, result, display} = await runtime.run("import webgrad\n1 + 1");
//   const info = await runtime.call("webgrad.store", "info_async", [url]);  // a webgrad function
//   runtime.on("progress", (data) => ...);   // webgrad_progress({...}) from Python
//   await runtime.interrupt();            // stop the run in progress
//   await runtime.restart();              // a fresh interpreter (variables are lost; files are kept)
//   runtime.terminate(reason?);           // stop for good; a run in progress rejects with a StoppedError
//
// boot(options) -> Promise<Runtime>. Options:
//   baseUrl      site root serving pyodide/ and wheels/ (default: the server this module came from)
//   device       "auto" | "webgpu" | "cpu"; anything else falls back to "auto" with a warning
//                in runtime.warnings (and the console)
//   onBoot(s)    boot progress {stage: "pyodide"|"numpy"|"webgrad"|"device"|"ready", message, fraction}
//   onProgress   same as on("progress", fn)
//   onInput(prompt) -> string | null | Promise: answers Python's input() (default: window.prompt);
//                null cancels (input() raises EOFError). Only where the page is cross-origin
//                isolated (SharedArrayBuffer); elsewhere input() raises EOFError saying so.
//   keepFiles    true (default): the working folder is kept in the browser's origin private file
//                system, so files written or uploaded survive restart(), a new runtime and a reload
//                (web/runtime/kept_files.js); a string: kept under that name instead of "webgrad-files"
//                (separate folders for separate apps of one site); false: files last as long as the worker
//   interruptGraceMs  how long interrupt() waits for Python before restarting the worker (3000)
//   bootTimeoutMs     how long the worker may take to start answering (15000)
//   stageTimeoutMs    how long one boot stage may take before boot() gives up (120000)
// A page on another site with a Content-Security-Policy needs, for the webgrad host H:
//   script-src H blob: 'wasm-unsafe-eval'; connect-src H   (Pyodide compiles WebAssembly; the
//   worker is a Blob-URL module worker, which Chrome checks against script-src)
// Boot failures reject within seconds with a BootError: .cause is "csp" (WebAssembly blocked:
// the page's CSP lacks 'wasm-unsafe-eval'), "asset" (a file answered 404 or could not be
// fetched), "worker" (no Web Worker: CSP worker-src, or the script missing), "timeout" or
// "python"; .fix says what to do, and the message includes both.
//
// run(code, {filename = "<playground>"}) -> Promise<{stdout, stderr, result, display}>:
//   result   the last expression's value as JSON-able data (tensors become nested lists), or null
//   display  null, or a mime bundle {"text/plain": repr(value), "text/html"?: ...} (rich display,
//            from webgrad.display.rich_repr or _repr_html_)
//   Rejects with a PythonError {message, traceback, pythonType, line, stdout, stderr}: the
//   traceback keeps the user's frames (File "<playground>", line N) and webgrad's, not
//   Pyodide's; line is the cell's line that failed (null if none). A stopped run rejects
//   with pythonType "KeyboardInterrupt".
//
// call(module, fn, args = [], {transfer = []}) -> Promise<value>: module.fn(*args) in the worker,
//   awaited if it is a coroutine, without building Python source: only webgrad's own modules
//   ("webgrad" and "webgrad.*") and modules already imported from the working folder (a file the
//   page wrote with files.write and imported once with run("import NAME"), as the demos do; the
//   standard library and site-packages stay out), only public names. Typed arrays and ArrayBuffers in args reach
//   Python as memoryviews (ArrayBuffers named in `transfer` move rather than copy); the value
//   comes back as JSON-able data, one-dimensional numpy arrays and bytes as typed arrays (their
//   buffers transferred). Rejects with a PythonError as run() does; interrupt() stops it too.
//
// Events (runtime.on(name, fn) returns a function that stops listening):
//   "boot"      boot stages (also after a restart)
//   "progress"  webgrad_progress(dict) calls: plain JSON-able data
//   "stdout", "stderr"  text as Python writes it
//   "input"     {prompt} when Python waits in input()
//   "restart"   {reason: "interrupt" | "user"} after the worker was replaced
//
// runtime.files: the worker's working-directory files (what the code wrote with open()), kept
// across restarts and reloads (see keepFiles; a write or delete here is kept before it resolves,
// what the code wrote is kept before its run resolves):
//   await runtime.files.list()           -> [{path, size, mtime}]
//   await runtime.files.read(path)       -> Uint8Array
//   await runtime.files.write(path, bytes | string)
//   await runtime.files.delete(path)
//
// Interrupts: where the page is cross-origin isolated (COOP/COEP), a SharedArrayBuffer lets
// interrupt() raise KeyboardInterrupt inside Python and the state is kept. Elsewhere, or when
// Python does not stop within interruptGraceMs (a long C call, awaiting a promise), the worker
// is replaced: the run (and any queued) rejects with KeyboardInterrupt, earlier variables are
// gone, and "restart" fires. runtime.interruptMode says which comes first.
import {BOOT_CAUSES, CONTROL, DEVICES, INPUT, MSG} from "./protocol.js";

export {BOOT_CAUSES, DEVICES};

/** A Python exception from runtime.run(): message is its last line, .traceback the whole. */
export class PythonError extends Error {
  constructor({message, traceback, pythonType, line, stdout, stderr}) {
    super(message);
    this.name = "PythonError";
    this.traceback = traceback;
    this.pythonType = pythonType;
    this.line = line ?? null;
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

/** A run stopped because the runtime was terminated (e.g. a page switching device): not an error
 * in the code. .reason says why, in the words terminate(reason) was given. */
export class StoppedError extends Error {
  constructor(reason) {
    super(`webgrad: the run was stopped: ${reason}`);
    this.name = "StoppedError";
    this.reason = reason;
  }
}

/** boot() failed: .cause (a BOOT_CAUSES value) and .fix. */
export class BootError extends Error {
  constructor(cause, message, fix) {
    super(`webgrad: boot failed (${cause}): ${message}${fix ? `. Fix: ${fix}` : ""}`);
    this.name = "BootError";
    this.cause = cause;
    this.fix = fix || "";
  }
}

function defaultBaseUrl() {
  return new URL("../", import.meta.url).href;  // this file lives in <root>/runtime/
}

function startWorker(baseUrl) {
  const workerUrl = new URL("runtime/worker.js", baseUrl).href;
  if (new URL(workerUrl).origin === self.location.origin) {
    return {worker: new Worker(workerUrl, {type: "module"}), blobUrl: null, workerUrl};
  }
  // Workers must be same-origin with the page: a Blob-URL module worker that imports the real one.
  const source = `import ${JSON.stringify(workerUrl)};\n`;
  const blobUrl = URL.createObjectURL(new Blob([source], {type: "text/javascript"}));
  return {worker: new Worker(blobUrl, {type: "module"}), blobUrl, workerUrl};
}

// Why the worker script did not load: its HTTP status when we can see it.
async function explainWorkerError(workerUrl) {
  try {
    const response = await fetch(workerUrl, {method: "HEAD"});
    if (!response.ok) {
      return new BootError(BOOT_CAUSES.ASSET, `${workerUrl} answered ${response.status}`,
                           "run `python -m server.assets` on the server, and check the baseUrl");
    }
  } catch (err) {
    return new BootError(BOOT_CAUSES.ASSET, `could not fetch ${workerUrl} (${err.message || err})`,
                         "check that the webgrad server is running; the page's CSP connect-src must allow it");
  }
  return new BootError(BOOT_CAUSES.WORKER, `the Web Worker ${workerUrl} could not start`,
                       "allow it in the page's Content-Security-Policy: script-src (and worker-src, if set) " +
                       "must allow the webgrad host and blob:; then check the browser console");
}

export class Runtime {
  constructor(options = {}) {
    this.baseUrl = new URL(options.baseUrl || defaultBaseUrl(), self.location.href).href;
    if (!this.baseUrl.endsWith("/")) this.baseUrl += "/";
    this.warnings = [];
    this.requestedDevice = options.device || "auto";
    if (!DEVICES.includes(this.requestedDevice)) {
      const warning = `device ${JSON.stringify(options.device)} is not one of ${DEVICES.join(", ")}; using "auto"`;
      this.warnings.push(warning);
      console.warn(`webgrad: ${warning}`);
      this.requestedDevice = "auto";
    }
    this.device = null;
    this.deviceReason = null;
    this.adapter = null;
    this.versions = null;
    this.timings = null;
    this.pythonStart = null;
    this.numpyFrom = null;
    this.imagesFrom = null;
    this.bootMs = null;
    this.interruptMode = null;
    this.inputMode = null;
    this.keepFiles = options.keepFiles ?? true;
    this.interruptGraceMs = options.interruptGraceMs ?? 3000;
    this.bootTimeoutMs = options.bootTimeoutMs ?? 15000;
    this.stageTimeoutMs = options.stageTimeoutMs ?? 120000;
    this.onInput = options.onInput || ((prompt) => self.prompt(prompt));
    this._listeners = {boot: new Set(), progress: new Set(), stdout: new Set(), stderr: new Set(),
                       input: new Set(), restart: new Set()};
    if (options.onProgress) this._listeners.progress.add(options.onProgress);
    if (options.onBoot) this._listeners.boot.add(options.onBoot);
    this._pending = new Map();
    this._fileRequests = new Map();
    this._nextId = 1;
    this._worker = null;
    this.files = {
      list: () => this._files("list"),
      read: (path) => this._files("read", path),
      write: (path, data) => this._files("write", path,
        typeof data === "string" ? new TextEncoder().encode(data) : new Uint8Array(data)),
      delete: (path) => this._files("delete", path),
    };
  }

  /** Listen to an event (see the top of this file); returns a function that stops listening. */
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
    this._control = shared ? new Int32Array(new SharedArrayBuffer(CONTROL.LENGTH * 4)) : null;
    this._input = shared ? new SharedArrayBuffer(INPUT.DATA_OFFSET + INPUT.BYTES) : null;
    let started_;
    try {
      started_ = startWorker(this.baseUrl);
    } catch (err) {  // a CSP without worker-src for this URL throws here
      throw new BootError(BOOT_CAUSES.WORKER, `the Web Worker could not be created (${err.message || err})`,
                          "allow the webgrad host (and blob:) in the page's CSP worker-src");
    }
    const {worker, blobUrl, workerUrl} = started_;
    this._worker = worker;
    let alive = false;
    let lastMessage = performance.now();
    let stage = "starting the worker";
    /** @type {Promise<void>} */
    const ready = new Promise((resolve, reject) => { this._booting = {resolve, reject}; });
    const fail = (error) => {
      if (this._booting) this._booting.reject(error);
      this._booting = null;
      this._rejectAll(error);
    };
    // Watchdogs: the worker must say it is alive soon, and then make progress through the stages.
    const watchdog = setInterval(() => {
      const quiet = performance.now() - lastMessage;
      if (!alive && quiet > this.bootTimeoutMs) {
        fail(new BootError(BOOT_CAUSES.TIMEOUT, `the worker did not answer within ${this.bootTimeoutMs} ms`,
                           "check the browser console; the page's CSP must allow the worker and its imports"));
      } else if (alive && quiet > this.stageTimeoutMs) {
        fail(new BootError(BOOT_CAUSES.TIMEOUT, `booting stalled for ${Math.round(quiet / 1000)} s at: ${stage}`,
                           "check the browser console and the network tab for a failed request"));
      }
    }, Math.min(1000, this.bootTimeoutMs));
    worker.onmessage = (event) => {
      alive = true;
      lastMessage = performance.now();
      if (event.data.type === MSG.BOOT) stage = event.data.message;
      this._receive(event.data);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      if (!alive) {
        explainWorkerError(workerUrl).then(fail);
      } else {
        fail(new Error(`webgrad: the worker failed: ${event.message || "unknown error"}`));
      }
    };
    worker.postMessage({type: MSG.BOOT, baseUrl: this.baseUrl, device: this.requestedDevice,
                        control: this._control, input: this._input, keepFiles: this.keepFiles});
    try {
      await ready;
    } catch (err) {
      worker.terminate();
      if (this._worker === worker) this._worker = null;
      throw err;
    } finally {
      clearInterval(watchdog);
      if (blobUrl) URL.revokeObjectURL(blobUrl);
    }
    this.bootMs = Math.round(performance.now() - started);
    return this;
  }

  _receive(message) {
    switch (message.type) {
      case MSG.ALIVE:
        break;
      case MSG.BOOT:
        this._emit("boot", {stage: message.stage, message: message.message, fraction: message.fraction});
        break;
      case MSG.PROGRESS:
        this._emit("progress", message.data);
        break;
      case MSG.STDOUT:
      case MSG.STDERR:
        this._emit(message.type, message.text);
        break;
      case MSG.INPUT:
        this._answerInput(message.prompt);
        break;
      case MSG.READY:
        this.device = message.device;
        this.deviceReason = message.deviceReason;
        this.adapter = message.adapter;
        this.versions = message.versions;
        this.timings = message.timings;
        this.pythonStart = message.pythonStart;
        this.numpyFrom = message.numpyFrom;
        this.imagesFrom = message.imagesFrom;
        this.interruptMode = message.interrupt;
        this.inputMode = message.input;
        if (this._booting) this._booting.resolve();
        this._booting = null;
        break;
      case MSG.BOOTFAIL:
        if (this._booting) this._booting.reject(new BootError(message.cause, message.message, message.fix));
        this._booting = null;
        break;
      case MSG.RESULT: {
        const pending = this._take(message.id);
        if (pending) {
          pending.resolve({stdout: message.stdout, stderr: message.stderr, result: message.result,
                           display: message.display});
        }
        break;
      }
      case MSG.ERROR: {
        const pending = this._take(message.id);
        if (pending) pending.reject(new PythonError(message));
        break;
      }
      case MSG.FILES: {
        const request = this._fileRequests.get(message.id);
        this._fileRequests.delete(message.id);
        if (request && message.ok) request.resolve(message.value);
        else if (request) request.reject(new Error(`webgrad: ${message.message}`));
        break;
      }
      default:
        console.warn("webgrad: unknown message from the worker", message);
    }
  }

  async _answerInput(prompt) {
    this._emit("input", {prompt});
    const state = new Int32Array(this._input, 0, 2);
    let answer = null;
    try {
      answer = await this.onInput(prompt);
    } catch (err) {
      console.error("webgrad: onInput failed", err);
    }
    if (answer === null || answer === undefined) {
      Atomics.store(state, INPUT.STATE, INPUT.CANCELLED);
    } else {
      const bytes = new TextEncoder().encode(String(answer)).slice(0, INPUT.BYTES);
      new Uint8Array(this._input, INPUT.DATA_OFFSET, bytes.length).set(bytes);
      Atomics.store(state, INPUT.LENGTH, bytes.length);
      Atomics.store(state, INPUT.STATE, INPUT.ANSWERED);
    }
    Atomics.notify(state, INPUT.STATE);
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
    for (const request of this._fileRequests.values()) request.reject(error);
    this._fileRequests.clear();
  }

  _files(op, path = null, data = null) {
    if (!this._worker) return Promise.reject(new Error("webgrad: the runtime was terminated"));
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._fileRequests.set(id, {resolve, reject});
      this._worker.postMessage({type: MSG.FILES, id, op, path, data});
    });
  }

  /** Run Python source; resolves {stdout, stderr, result, display}, rejects with a PythonError. */
  run(code, {filename = "<playground>"} = {}) {
    return this._send({type: MSG.RUN, code: String(code), filename: String(filename)});
  }

  /**
   * Call a function of one of webgrad's own modules (module "webgrad" or "webgrad.*"), or of a
   * module already imported from the working folder (the page's own file), with
   * structured-clonable args; typed arrays and ArrayBuffers reach Python as memoryviews, and
   * those listed in `transfer` (ArrayBuffers) move to the worker instead of being copied (they
   * are detached here). Resolves to the return value: JSON-able data, with one-dimensional numpy
   * arrays and bytes as typed arrays. Rejects with a PythonError, as run() does (another module,
   * or a name that is not a public function of it, says so). Calls and runs execute in order.
   */
  async call(module, fn, args = [], {transfer = []} = {}) {
    const {result} = await this._send({type: MSG.CALL, module: String(module), function: String(fn),
                                       args: Array.from(args)}, transfer);
    return result;
  }

  // A run or a call: pending until the worker answers with a result or an error of the same id.
  _send(message, transfer = []) {
    if (!this._worker) return Promise.reject(new Error("webgrad: the runtime was terminated"));
    const id = this._nextId++;
    let settle;
    const settled = new Promise((resolve) => { settle = resolve; });
    return new Promise((resolve, reject) => {
      this._pending.set(id, {resolve, reject, settle, settled});
      this._worker.postMessage({...message, id}, transfer);
    });
  }

  /** Stop the run in progress. Resolves once the runtime accepts new runs. */
  async interrupt() {
    if (!this._worker || this._pending.size === 0) return;
    const target = Math.min(...this._pending.keys());  // runs execute in order: the oldest is running
    if (this._control) {
      // Aim first, then signal: the worker drops a signal aimed at another run (one that already ended).
      Atomics.store(this._control, CONTROL.TARGET, target);
      Atomics.store(this._control, CONTROL.SIGNAL, CONTROL.SIGINT);
      const timer = new Promise((resolve) => setTimeout(() => resolve(false), this.interruptGraceMs));
      const stopped = await Promise.race([this._pending.get(target).settled.then(() => true), timer]);
      if (stopped) return;
    }
    await this._restart("interrupt");
  }

  /** Replace the worker with a fresh one (earlier variables are gone); fires "restart". */
  async restart() {
    await this._restart("user");
  }

  async _restart(reason) {
    const error = Object.assign(new Error("KeyboardInterrupt: the run was stopped (the worker restarted, so " +
      "earlier variables are gone" + (this._control ? ")" : "; serve the page with COOP/COEP headers to keep them)")),
      {pythonType: "KeyboardInterrupt"});
    if (this._worker) this._worker.terminate();
    this._worker = null;
    this._rejectAll(error);
    await this._start();
    this._emit("restart", {reason});
  }

  /** Stop the worker for good. A run in progress (and any queued) rejects with a StoppedError
   * carrying `reason`. Kept files are safe: each write was kept before it resolved. */
  terminate(reason = "the runtime was terminated") {
    if (this._worker) this._worker.terminate();
    this._worker = null;
    this._rejectAll(new StoppedError(reason));
  }
}

/** Start a runtime (options at the top of this file). */
export async function boot(options = {}) {
  const runtime = new Runtime(options);
  await runtime._start();
  return runtime;
}
