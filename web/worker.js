// webgrad worker: Pyodide + numpy + the webgrad wheel, in a classic Web Worker, so
// the page never freezes while Python runs. Started by webgrad.js (`boot()`).
//
// Message protocol (every message is a plain object with a `type`):
//
//   page -> worker
//     {type: "boot", baseUrl, device: "auto"|"webgpu"|"cpu", control}
//         baseUrl: absolute URL of the site root (…/ with /pyodide/, /wheels/ below it).
//         control: an Int32Array(2) over a SharedArrayBuffer, or null where the page
//         is not cross-origin isolated. To interrupt run `id` the page writes id into
//         control[1], then 2 (SIGINT) into control[0], Pyodide's interrupt buffer:
//         Python raises KeyboardInterrupt at its next bytecode check. The id keeps a
//         signal that arrives after its run ended from killing the next run; a run
//         whose signal came before it started is rejected without running.
//     {type: "run", id, code}
//         Run Python source (top-level await allowed) with pyodide.runPythonAsync,
//         always: pyodide.ffi.run_sync (WebGPU readback) only works when entered so.
//         Runs execute one after another, in the order sent.
//
//   worker -> page
//     {type: "progress", id, data}   boot stages (id null, data {stage, message,
//                                    fraction}) and webgrad_progress(dict) calls
//                                    from Python during run `id`.
//     {type: "stdout"|"stderr", id, text}   output as it is written (also returned whole).
//     {type: "ready", device, deviceReason, adapter, versions, timings, interrupt}
//     {type: "result", id, stdout, stderr, result}   result: JSON-able value or null.
//     {type: "error", id, stdout, stderr, message, traceback, pythonType}
//         id null: boot failed (the runtime is unusable).
//
// Interrupts without a SharedArrayBuffer (pages served without COOP/COEP headers),
// or that Python does not act on in time: the page terminates this worker and
// boots a fresh one (Python state is lost).
//
// In Python, `webgrad_progress(dict)` (a global; also `from webgrad_runtime import
// progress`, for modules) sends a progress event: values may be tensors, the page
// gets JSON-able data. `WEBGRAD_DEVICE` is the chosen device, `WEBGRAD_BASE_URL`
// the site root.
"use strict";

let pyodide = null;
let control = null;      // the interrupt control block (see the protocol above)
const SIGNAL = 0;
const TARGET = 1;
const SIGINT = 2;
let current = null;      // {id, stdout, stderr} of the run in progress
let queue = Promise.resolve();
const decoders = {stdout: new TextDecoder(), stderr: new TextDecoder()};

function post(message) {
  self.postMessage(message);
}

function progress(id, data) {
  post({type: "progress", id, data});
}

// Python's sys.stdout/sys.stderr: keep the text of the current run, and stream it.
function writer(stream) {
  return {
    write(bytes) {
      const text = decoders[stream].decode(bytes, {stream: true});
      if (text) {
        if (current) current[stream] += text;
        post({type: stream, id: current ? current.id : null, text});
      }
      return bytes.length;
    },
  };
}

// Called by Python's webgrad_progress (defined in BOOTSTRAP) with a plain JS object.
function pythonProgress(data) {
  progress(current ? current.id : null, data);
}

// Runs once after the wheel is installed: helpers, then the device choice.
const BOOTSTRAP = `
import sys, json
import webgrad

for _stream in (sys.stdout, sys.stderr):  # stream output line by line, as a terminal does
    try:
        _stream.reconfigure(line_buffering=True)
    except Exception:
        pass

def _webgrad_jsonable(value, _depth=0):
    """A result as JSON-able Python values (dict/list/str/float/int/bool/None)."""
    import numpy as np
    if _depth > 50:
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, webgrad.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _webgrad_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_webgrad_jsonable(v, _depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    return repr(value)

def webgrad_progress(data=None, /, **fields):
    """Send a progress event to the page, e.g. webgrad_progress({"step": 3, "total": 10, "loss": loss}).
    Values may be tensors or numpy values; the page receives plain JSON-able data."""
    from pyodide.ffi import to_js
    import js
    merged = dict(data or {}, **fields) if isinstance(data, dict) or data is None else {"value": data, **fields}
    _webgrad_post_progress(to_js(_webgrad_jsonable(merged), dict_converter=js.Object.fromEntries,
                                 create_pyproxies=False))

def _webgrad_runtime_module():
    import types
    module = types.ModuleType("webgrad_runtime", "The browser runtime's hooks: progress(dict) reaches the page.")
    module.progress = webgrad_progress
    sys.modules["webgrad_runtime"] = module

_webgrad_runtime_module()

def _webgrad_choose_device(requested):
    if requested == "cpu":
        return "cpu", "device='cpu' was requested"
    from webgrad import webgpu
    if not webgpu.is_available():
        from webgrad.backend.webgpu import _state
        why = _state["error"] or "unknown reason"
        if requested == "webgpu":
            return "cpu", f"device='webgpu' was requested but WebGPU is not available ({why}); using the CPU (numpy)"
        return "cpu", f"WebGPU is not available ({why}); using the CPU (numpy)"
    info = webgpu.adapter_info()
    name = " ".join(v for v in (info.get("vendor"), info.get("architecture"), info.get("device")) if v) or "unnamed"
    if requested == "webgpu":
        return "webgpu", f"device='webgpu' was requested (adapter: {name})"
    if info.get("adapter_type") == "CPU":
        return "cpu", (f"the WebGPU adapter ({name}) is a CPU emulation, where numpy in WebAssembly is "
                       f"faster; pass device='webgpu' to use it anyway")
    return "webgpu", f"WebGPU adapter {name} is a real GPU"

WEBGRAD_DEVICE, _reason = _webgrad_choose_device(_webgrad_requested_device)
webgrad.set_default_device(WEBGRAD_DEVICE)
_adapter = None
if WEBGRAD_DEVICE == "webgpu" or _webgrad_requested_device != "cpu":
    try:
        _adapter = webgrad.webgpu.adapter_info()
    except Exception:
        pass
json.dumps({"device": WEBGRAD_DEVICE, "reason": _reason, "adapter": _adapter,
            "versions": {"python": sys.version.split()[0], "webgrad": webgrad.__version__,
                         "numpy": __import__("numpy").__version__}})
`;

async function boot({baseUrl, device, control: controlBlock}) {
  const started = performance.now();
  const timings = {};
  const mark = (name) => { timings[name] = Math.round(performance.now() - started); };
  progress(null, {stage: "pyodide", message: "loading Python (Pyodide)", fraction: 0.05});
  const indexURL = new URL("pyodide/", baseUrl).href;
  importScripts(indexURL + "pyodide.js");
  // Start fetching the wheel while Pyodide and numpy load (awaited below; the
  // catch only keeps an early failure from being reported as unhandled).
  const wheel = fetchWheel(baseUrl);
  wheel.catch(() => {});
  pyodide = await loadPyodide({indexURL, stdout: () => {}, stderr: () => {}});
  mark("pyodide");
  pyodide.setStdout(writer("stdout"));
  pyodide.setStderr(writer("stderr"));
  if (controlBlock) {
    control = controlBlock;
    pyodide.setInterruptBuffer(control.subarray(SIGNAL, SIGNAL + 1));
  }
  progress(null, {stage: "numpy", message: "loading numpy", fraction: 0.6});
  await pyodide.loadPackage(["numpy"], {messageCallback: () => {}, errorCallback: (m) => console.warn(m)});
  mark("numpy");
  progress(null, {stage: "webgrad", message: "installing webgrad", fraction: 0.8});
  const {name, bytes} = await wheel;
  const sitePackages = pyodide.runPython("import sysconfig\nsysconfig.get_paths()['purelib']");
  pyodide.unpackArchive(bytes, "wheel", {extractDir: sitePackages});
  mark("webgrad");
  pyodide.globals.set("_webgrad_post_progress", pythonProgress);
  pyodide.globals.set("WEBGRAD_BASE_URL", baseUrl);
  pyodide.globals.set("_webgrad_requested_device", device || "auto");
  await pyodide.runPythonAsync("import webgrad", {filename: "<webgrad boot>"});
  mark("import");
  progress(null, {stage: "device", message: "choosing the device", fraction: 0.9});
  const chosen = JSON.parse(await pyodide.runPythonAsync(BOOTSTRAP, {filename: "<webgrad boot>"}));
  mark("device");
  progress(null, {stage: "ready", message: `ready (${chosen.device})`, fraction: 1});
  return {
    device: chosen.device, deviceReason: chosen.reason, adapter: chosen.adapter,
    versions: {...chosen.versions, pyodide: pyodide.version, wheel: name},
    timings, interrupt: control ? "sharedarraybuffer" : "restart",
  };
}

async function fetchWheel(baseUrl) {
  const latestUrl = new URL("wheels/latest.json", baseUrl);
  const response = await fetch(latestUrl, {cache: "no-cache"});
  if (!response.ok) throw new Error(`webgrad: ${latestUrl} answered ${response.status}; run python -m server.assets`);
  const latest = await response.json();
  const name = latest.file || latest.wheel || latest.filename;
  const url = new URL(latest.url || name, latestUrl);
  const wheel = await fetch(url);
  if (!wheel.ok) throw new Error(`webgrad: ${url} answered ${wheel.status}`);
  const bytes = await wheel.arrayBuffer();
  if (latest.sha256 && self.crypto && self.crypto.subtle) {
    const digest = new Uint8Array(await self.crypto.subtle.digest("SHA-256", bytes));
    const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    if (hex !== latest.sha256) {
      throw new Error(`webgrad: ${url} has sha256 ${hex}, but latest.json says ${latest.sha256} ` +
                      "(a build replaced it mid-download?); reload the page");
    }
  }
  return {name: name || url.pathname.split("/").pop(), bytes};
}

// A Python traceback ends with "module.Type: message" (the message may span lines):
// that tail is the error's message; the whole text is its traceback.
function describeError(err) {
  const traceback = String((err && err.message) || err);
  const pythonType = (err && err.type) || null;
  const lines = traceback.trimEnd().split("\n");
  let start = lines.length - 1;
  if (pythonType) {
    const head = new RegExp(`^([\\w.]+\\.)?${pythonType}(:|$)`);
    const found = lines.findLastIndex((line) => head.test(line));
    if (found >= 0) start = found;
  }
  return {message: lines.slice(start).join("\n") || traceback, traceback, pythonType};
}

// Output still buffered in sys.stdout/sys.stderr (a line without its newline) belongs to this run.
function flush() {
  try {
    pyodide.runPython("import sys\nsys.stdout.flush()\nsys.stderr.flush()");
  } catch (err) {
    console.warn("webgrad: flushing stdout failed", err);
  }
}

async function run({id, code}) {
  if (control && Atomics.load(control, TARGET) === id && Atomics.compareExchange(control, SIGNAL, SIGINT, 0) === SIGINT) {
    // Interrupted before it began: it never starts. Left to Python, the signal would land in
    // Pyodide's own code that sets the run up, which can leave later runs hanging.
    post({type: "error", id, stdout: "", stderr: "", message: "KeyboardInterrupt", traceback: "KeyboardInterrupt",
          pythonType: "KeyboardInterrupt"});
    return;
  }
  current = {id, stdout: "", stderr: ""};
  if (control && Atomics.load(control, TARGET) !== id) Atomics.store(control, SIGNAL, 0);  // aimed at an earlier run
  let value;
  let converter;
  try {
    value = await pyodide.runPythonAsync(code, {filename: "<webgrad>"});
    let result = value === undefined ? null : value;
    if (value instanceof pyodide.ffi.PyProxy) {
      // Tensor results may need a GPU readback (run_sync): convert through callPromising.
      converter = pyodide.globals.get("_webgrad_jsonable");
      const plain = await converter.callPromising(value);
      if (plain instanceof pyodide.ffi.PyProxy) {
        result = plain.toJs({dict_converter: Object.fromEntries, create_pyproxies: false});
        plain.destroy();
      } else {
        result = plain === undefined ? null : plain;
      }
    }
    flush();
    post({type: "result", id, stdout: current.stdout, stderr: current.stderr, result});
  } catch (err) {
    flush();
    post({type: "error", id, stdout: current.stdout, stderr: current.stderr, ...describeError(err)});
  } finally {
    if (value instanceof pyodide.ffi.PyProxy) value.destroy();
    if (converter) converter.destroy();
    if (control && Atomics.load(control, TARGET) === id) Atomics.store(control, SIGNAL, 0);  // it came too late
    current = null;
  }
}

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === "boot") {
    queue = queue.then(() => boot(message)).then(
      (ready) => post({type: "ready", ...ready}),
      (err) => post({type: "error", id: null, ...describeError(err)}));
  } else if (message.type === "run") {
    queue = queue.then(() => (pyodide ? run(message) :
      post({type: "error", id: message.id, stdout: "", stderr: "", message: "webgrad: the runtime did not boot",
            traceback: "", pythonType: null})));
  }
};
