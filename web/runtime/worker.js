// worker.js: Pyodide + numpy + the webgrad wheel in a module Web Worker, so the page never
// freezes while Python runs. Started by runtime/webgrad.js; the messages are in protocol.js.
// The Python half (boot, run a cell, call a webgrad function, trim tracebacks, input(), files)
// is the wheel's webgrad.web.worker module.
//
// Runs execute one after another in the order sent, always entered through
// callPromising: pyodide.ffi.run_sync (WebGPU readback) only works when entered so.
// Interrupts: the page writes the run id into control[TARGET], then SIGINT into
// control[SIGNAL] (Pyodide's interrupt buffer); a signal aimed at a run that already
// ended is dropped, and a run whose signal came before it started never starts. Python raises it
// only inside the run's own code; landing elsewhere it is armed again (webgrad.web.worker._on_interrupt).
import {fetchImage, forgetImage, imageFolder, imagesFrom, keepImages} from "./images.js";
import {forgetFile, isKept, keepFile, openKept, readKept, restore, sync} from "./kept_files.js";
import {BOOT_CAUSES, CONTROL, INPUT, MSG, jspiKind} from "./protocol.js";

let pyodide = null;
let python = null;       // the webgrad.web.worker module (a PyProxy)
let control = null;      // interrupt control block, or null
let inputBuffer = null;  // SharedArrayBuffer for input() answers, or null
let current = null;      // {id, stdout, stderr} of the run in progress
let ended = 0;           // the id of the last run that ended (ids grow: runs execute in order)
let queue = Promise.resolve();
let kept = null;         // the working folder kept in the browser's storage (kept_files.js), or null
let filesRoot = null;    // the working folder: Python's working directory at boot
let keeping = Promise.resolve();  // copies into the kept folder, one after another
const FILES_FOLDER = "webgrad-files";  // the kept folder's default name (boot's keepFiles)
const decoders = {stdout: new TextDecoder(), stderr: new TextDecoder()};

const post = (message, transfer = []) => self.postMessage(message, {transfer});

// A WebGPU dispatch's three pass calls in one call from Python, which finds it as
// js.webgradRecordDispatch (webgrad/backend/webgpu/browser.py): each call across the FFI costs.
/** @type {any} */ (globalThis).webgradRecordDispatch = (pass, pipeline, group, x, y, z) => {
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, group);
  pass.dispatchWorkgroups(x, y, z);
};

/** A boot failure that knows its cause and fix (see protocol.js BOOT_CAUSES). */
class BootFailure extends Error {
  constructor(cause, message, fix) {
    super(message);
    this.cause = cause;
    this.fix = fix;
  }
}

function stage(name, message, fraction) {
  post({type: MSG.BOOT, stage: name, message, fraction});
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

// Called by Python's input() (webgrad.web.worker._input): blocks until the page answers.
function askInput(prompt) {
  const state = new Int32Array(inputBuffer, 0, 2);
  Atomics.store(state, INPUT.STATE, INPUT.WAITING);
  post({type: MSG.INPUT, id: current ? current.id : null, prompt});
  Atomics.wait(state, INPUT.STATE, INPUT.WAITING);
  if (Atomics.load(state, INPUT.STATE) !== INPUT.ANSWERED) return null;
  const length = Atomics.load(state, INPUT.LENGTH);
  // TextDecoder refuses views of shared memory: copy the bytes out first.
  return new TextDecoder().decode(new Uint8Array(inputBuffer, INPUT.DATA_OFFSET, length).slice());
}

// WebAssembly refused by the CSP fails here in milliseconds; inside Pyodide it would leave boot hanging.
async function checkWebAssembly() {
  const empty = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]);  // "\0asm", version 1
  try {
    await WebAssembly.compile(empty);
  } catch (err) {
    const text = String(err && err.message || err);
    if (/content security policy|unsafe-eval|CSP/i.test(text) || (err && err.name === "EvalError")) {
      throw new BootFailure(BOOT_CAUSES.CSP,
        `WebAssembly is blocked by this page's Content-Security-Policy (${text})`,
        "add 'wasm-unsafe-eval' to the page's script-src (Pyodide compiles WebAssembly)");
    }
    throw new BootFailure(BOOT_CAUSES.WORKER, `WebAssembly does not work in this browser's worker (${text})`,
                          "use a browser with WebAssembly enabled");
  }
}

const MISSING_FIX = "run `python -m server.assets` on the server (it builds the browser assets)";

// A fetch that names the URL, its status and the fix when it fails.
async function fetchAsset(url, options) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (err) {
    throw new BootFailure(BOOT_CAUSES.ASSET, `could not fetch ${url} (${err.message || err})`,
                          "check that the webgrad server is running and reachable (connect-src of the page's CSP)");
  }
  if (!response.ok) throw new BootFailure(BOOT_CAUSES.ASSET, `${url} answered ${response.status}`, MISSING_FIX);
  return response;
}

// Pyodide's own files, which loadPyodide fetches itself: one that answers an error leaves it
// hanging (it logs the failure and waits), so boot watches for that (watchPyodideFiles).
const PYODIDE_FILES = ["pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"];

// Turns an error status of one of Pyodide's own files into a boot failure naming it, from the
// resource timing entry each fetch leaves (its responseStatus), so nothing is requested twice:
// asking first with HEAD requests, as boot did before, sent four more requests per boot, and
// Chromium reported them aborted. A browser without responseStatus gets those HEAD requests.
// Returns {failed: a promise that only ever rejects, stop()}.
function watchPyodideFiles(indexURL) {
  const urls = new Set(PYODIDE_FILES.map((name) => indexURL + name));
  let stop = () => {};
  const failed = new Promise((_, reject) => {
    const fail = (url, status) => reject(new BootFailure(BOOT_CAUSES.ASSET, `${url} answered ${status}`, MISSING_FIX));
    if (typeof PerformanceResourceTiming !== "undefined" && "responseStatus" in PerformanceResourceTiming.prototype) {
      const observer = new PerformanceObserver((list) => {
        for (const entry of /** @type {PerformanceResourceTiming[]} */ (list.getEntries())) {
          if (urls.has(entry.name) && entry.responseStatus >= 400) fail(entry.name, entry.responseStatus);
        }
      });
      observer.observe({type: "resource", buffered: true});
      stop = () => observer.disconnect();
    } else {
      for (const url of urls) fetchAsset(url, {method: "HEAD"}).catch(reject);
    }
  });
  failed.catch(() => {});  // raced against boot's steps; on its own it is no one's error
  return {failed, stop: () => stop()};
}

// pyodide.mjs, and pyodide.asm.js as loadPyodide would import it (it defines the module factory
// that startPython wraps).
async function importPyodide(indexURL) {
  const load = async (url) => {
    try {
      return await import(url);
    } catch (err) {
      await fetchAsset(url, {method: "HEAD"});  // names a 404 precisely
      throw new BootFailure(BOOT_CAUSES.CSP, `could not import ${url}, although the server has it (${err.message || err})`,
                            `allow ${new URL(url).origin} in the page's Content-Security-Policy script-src`);
    }
  };
  const [module] = await Promise.all([load(indexURL + "pyodide.mjs"), load(indexURL + "pyodide.asm.js")]);
  return module;
}

async function fetchWheelOnce(baseUrl) {
  const latestUrl = new URL("wheels/latest.json", baseUrl);
  const latest = await (await fetchAsset(latestUrl, {cache: "no-cache"})).json();
  let name = latest.file || latest.wheel || latest.filename;
  // The wheel's files as an image (server/wheel.py write_image) where the server offers one.
  const {url: pinned, sha256} = latest.image || {url: latest.url || name, sha256: latest.sha256};
  const url = new URL(pinned, latestUrl);
  const bytes = latest.image ? await fetchImage(url.href, "webgrad", fetchAsset)
    : new Uint8Array(await (await fetchAsset(url)).arrayBuffer());
  if (sha256 && self.crypto && self.crypto.subtle) {
    const digest = new Uint8Array(await self.crypto.subtle.digest("SHA-256", bytes));
    const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    if (hex !== sha256) {
      await forgetImage(url.href);  // the next attempt fetches it again
      throw new BootFailure(BOOT_CAUSES.ASSET, `${url} has sha256 ${hex}, but latest.json says ${sha256}`,
                            "reload the page (a build replaced the wheel mid-download)");
    }
  }
  name = name || url.pathname.split("/").pop();
  return latest.image ? {name, image: bytes} : {name, bytes};
}

// The server rebuilds the wheel when core/ changes; a build landing between latest.json and
// the download gives a 404 (the pinned URL moved on) or a digest mismatch: ask again.
async function fetchWheel(baseUrl) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetchWheelOnce(baseUrl);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof BootFailure) || err.cause !== BOOT_CAUSES.ASSET) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
    }
  }
}

// The WebGPU adapter, asked for while Pyodide starts rather than after it. Python describes
// it; on device="auto" a CPU emulation then gets no WebGPU device at boot (it used to make
// one, adapter and device, only to choose the cpu).
async function requestAdapter() {
  if (!self.navigator.gpu) return null;
  try {
    return await self.navigator.gpu.requestAdapter({powerPreference: "high-performance"});
  } catch {
    return null;  // Python asks again and reports why
  }
}

// numpy's files as Pyodide's loader unpacks them, with bytecode, made by the asset step
// (server/numpy_image.mjs): written straight into the file system, they spare loadPackage's
// unpacking in Python (about 270 ms) and `import numpy` its compiling (about 200 ms).
// Fetched while Pyodide starts; null when there is none or it cannot be fetched (numpy then
// comes from loadPackage, as before).
async function fetchNumpyImage(indexURL) {
  try {
    const manifest = await fetch(indexURL + "numpy-image.json", {cache: "no-cache"});
    if (!manifest.ok) return null;
    const {file} = await manifest.json();
    return {url: indexURL + file, bytes: await fetchImage(indexURL + file, "numpy")};
  } catch {
    return null;
  }
}

// An image's files into site-packages; returns its header. Layout (server/numpy_image.mjs,
// server/wheel.py): a 4-byte little-endian header length, the header (JSON: {files: [[path,
// size], ...], ...}, paths relative to site-packages), then the files' bytes in order.
function installImage(pyodide, image, sitePackages) {
  const length = new DataView(image.buffer, image.byteOffset, 4).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(image.subarray(4, 4 + length)));
  const made = new Set();
  let at = 4 + length;
  for (const [relative, size] of header.files) {
    if (relative.startsWith("/") || relative.split("/").includes("..")) {
      throw new Error(`an image's file outside site-packages: ${relative}`);
    }
    const target = `${sitePackages}/${relative}`;
    const folder = target.slice(0, target.lastIndexOf("/"));
    if (!made.has(folder)) {
      pyodide.FS.mkdirTree(folder);
      made.add(folder);
    }
    pyodide.FS.writeFile(target, image.subarray(at, at + size));
    at += size;
  }
  if (at !== image.length) throw new Error(`an image of ${image.length} bytes whose header lists ${at}`);
  return header;
}

// numpy from its image: its files, its shared libraries loaded as loadPackage loads them, and
// numpy marked loaded (so that loadPackage and micropip see it); else from its wheel.
async function loadNumpy(pyodide, image, sitePackages) {
  if (image && image.bytes) {
    try {
      const {wheel, dynlibs} = installImage(pyodide, image.bytes, sitePackages);
      await pyodide._api.loadDynlibsFromPackage({file_name: wheel}, dynlibs.map((p) => `${sitePackages}/${p}`));
      pyodide.loadedPackages.numpy = "default channel";
      return "image";
    } catch (err) {
      forgetImage(image.url);
      console.warn(`webgrad: numpy's image did not install (${err.message || err}); loading its wheel instead`);
    }
  }
  const failed = [];
  await pyodide.loadPackage(["numpy"], {messageCallback: () => {}, errorCallback: (m) => failed.push(m)});
  if (failed.length) {
    throw new BootFailure(BOOT_CAUSES.ASSET, `loading numpy failed: ${failed.join("; ")}`,
                          "run `python -m server.assets` on the server");
  }
  return "wheel";
}

// Python's memory right after its start, made by the asset step in Chromium
// (server/snapshot.mjs): restoring it skips Python's own start (about 1 s). Null when there is
// none (an asset folder from before snapshots), it cannot be fetched, or it was made by a
// runtime with another stack-switching API than this one (Python's start records which, and
// run_sync, which WebGPU needs, would then fail): Python then starts as usual. Else {url,
// size (of the memory image; absent from older manifests), bytes (its promise, null on failure)}.
async function fetchSnapshot(indexURL) {
  try {
    const manifest = await fetch(indexURL + "snapshot.json", {cache: "no-cache"});
    if (!manifest.ok) return null;
    const {file, jspi, size} = await manifest.json();
    if (jspi !== jspiKind()) return null;
    const url = indexURL + file;
    return {url, size, bytes: fetchImage(url, "snapshot").catch(() => null)};
  } catch {
    return null;
  }
}

// loadPyodide awaits a snapshot before it makes Pyodide's WebAssembly instance (the memory is
// sized by it), so compiling and instantiating the module would wait for the download. Given
// the size, it gets a zeroed image of that size at once, and Pyodide's module factory (0.27:
// _createPyodideModule, then restoreSnapshot), wrapped, returns only once the downloaded bytes
// are copied in: the download and the module's making overlap. startPython unwraps it.
function overlapRestore({size, bytes}, create, none) {
  const memory = new Uint8Array(size);
  globalThis._createPyodideModule = async (settings) => {
    globalThis._createPyodideModule = create;
    const [module, snapshot] = await Promise.all([create(settings), bytes]);
    if (!snapshot) throw none;
    if (snapshot.length !== size) throw new Error(`a snapshot of ${snapshot.length} bytes, not ${size}`);
    memory.set(snapshot);
    return module;
  };
  return memory;
}

// A snapshot is the build machine's Python as it was then. Two things in it must be the
// page's own: `random`'s state (else every visit would draw the same numbers), and the time
// zone, which emscripten's libc reads once (tzset) and Python's time module copies at import.
function localizeSnapshot(pyodide) {
  const m = pyodide._module;
  m.__tzset_js(m._timezone, m._daylight, m.HEAPU32[m._tzname >> 2], m.HEAPU32[(m._tzname >> 2) + 1]);
  // The zone as CPython's time module works it out at import, from January and July.
  pyodide.runPython(`import random, time
random.seed()
def _zone():
    year = (365 * 24 + 6) * 3600
    start = int(time.time()) // year * year
    jan, jul = time.localtime(start), time.localtime(start + year // 2)
    (std, dst) = (jul, jan) if jan.tm_gmtoff > jul.tm_gmtoff else (jan, jul)  # summer in January: the south
    time.timezone, time.altzone = -std.tm_gmtoff, -dst.tm_gmtoff
    time.daylight, time.tzname = int(std.tm_gmtoff != dst.tm_gmtoff), (std.tm_zone, dst.tm_zone)
_zone()
del _zone`);
}

// Pyodide, from the snapshot when there is one (``found``: fetchSnapshot's promise); a snapshot
// that fails to restore (it should not: it is made from these very files) falls back to
// Python's own start.
async function startPython(loadPyodide, indexURL, found) {
  const options = {indexURL, stdout: () => {}, stderr: () => {}};
  const snapshot = await found;
  if (snapshot) {
    const none = new Error("no snapshot");
    const create = globalThis._createPyodideModule;
    try {
      const memory = snapshot.size ? overlapRestore(snapshot, create, none) : await snapshot.bytes;
      if (!memory) throw none;
      const restored = await loadPyodide({...options, _loadSnapshot: memory});
      localizeSnapshot(restored);
      return {pyodide: restored, start: "snapshot"};
    } catch (err) {
      if (err !== none) {
        forgetImage(snapshot.url);
        console.warn(`webgrad: Pyodide's memory snapshot did not restore (${err.message || err}); starting Python instead`);
      }
    } finally {
      globalThis._createPyodideModule = create;
    }
  }
  return {pyodide: await loadPyodide(options), start: "fresh"};
}

// Boot, measured with bench/browser_bench.py --boot-only. Kept: the wheel's and numpy's
// images, the snapshot and the adapter fetched while Pyodide starts, and Pyodide's module made
// while the snapshot arrives (overlapRestore); both images written into the file system from
// here, not unpacked in Python; the images kept decoded for the next visit (keepImages).
// Checked and left: loadPyodide's `packages` (a missing wheel hangs it); checkAPIVersion and
// fullStdLib (a string compare; already false); unzipping the wheel here with one
// DecompressionStream per file (slower than Python's: hence the image); the Cache API for the
// kept images (slower than files). A second visit sends no body over the network
// (tests/browser/test_runtime.py): Pyodide's files come from the HTTP cache (immutable), the
// images from the kept files (read through sync access handles), and only latest.json,
// snapshot.json, numpy-image.json and the runtime's modules revalidate. What is left is mostly
// Pyodide's module (~200 ms, compiled code from Chromium's wasm code cache once an earlier visit
// has written it), numpy's shared libraries (~100 ms; webgrad's files and the kept working
// folder go in while they compile) and `import numpy` and webgrad (~250 ms; Pyodide 0.27 cannot
// put loaded shared libraries, numpy's, in a snapshot).
async function boot({baseUrl, device, control: controlBlock, input, keepFiles = true}) {
  const started = performance.now();
  // Milliseconds from the start of boot at which each step ended (they overlap: the wheel,
  // the adapter, the snapshot and numpy's image are fetched while Pyodide starts).
  const timings = {};
  const mark = (name) => { timings[name] = Math.round(performance.now() - started); };
  const after = (name, promise) => {
    const marked = promise.then((value) => { mark(name); return value; });
    marked.catch(() => {});  // awaited below; this only keeps an early failure from being "unhandled"
    return marked;
  };
  stage("pyodide", "loading Python (Pyodide)", 0.05);
  await checkWebAssembly();
  const indexURL = new URL("pyodide/", baseUrl).href;
  imageFolder();
  // The kept working folder, read while Python starts (an empty one costs a few milliseconds).
  const keptFolder = keepFiles === false ? Promise.resolve(null)
    : openKept(typeof keepFiles === "string" ? keepFiles : FILES_FOLDER);
  const keptFiles = keptFolder.then(readKept).catch((err) => {
    console.warn(`webgrad: the kept working folder could not be read (${err.message || err}); starting without it`);
    return [];
  });
  const wheel = after("wheel", fetchWheel(baseUrl));
  const adapter = after("adapter", device === "cpu" ? Promise.resolve(null) : requestAdapter());
  const numpyImage = after("numpy image", fetchNumpyImage(indexURL));
  const snapshot = fetchSnapshot(indexURL).then((found) => found && {...found, bytes: after("snapshot", found.bytes)});
  const watch = watchPyodideFiles(indexURL);
  const {loadPyodide} = await importPyodide(indexURL);
  mark("pyodide.mjs");
  const interpreter = await Promise.race([startPython(loadPyodide, indexURL, snapshot), watch.failed]);
  pyodide = interpreter.pyodide;
  mark("pyodide");
  pyodide.setStdout(writer("stdout"));
  pyodide.setStderr(writer("stderr"));
  if (controlBlock) {
    control = controlBlock;
    pyodide.setInterruptBuffer(control.subarray(CONTROL.SIGNAL, CONTROL.SIGNAL + 1));
  }
  inputBuffer = input || null;
  stage("numpy", "loading numpy", 0.6);
  // site is imported already; sysconfig would cost an import (~20 ms).
  const sitePackages = pyodide.runPython("import site\nsite.getsitepackages()[0]");
  // numpy's shared libraries compile off this thread: webgrad's files and the kept working folder
  // go in meanwhile, rather than after (on a busy machine this thread waits its turn for a core).
  const numpyLoaded = Promise.race([loadNumpy(pyodide, await numpyImage, sitePackages), watch.failed]);
  numpyLoaded.catch(() => {});  // awaited below
  const {name, bytes, image} = await wheel;
  if (image) {
    installImage(pyodide, image, sitePackages);
  } else {
    pyodide.unpackArchive(bytes, "wheel", {extractDir: sitePackages});
  }
  mark("unpack");
  filesRoot = pyodide.FS.cwd();
  kept = await keptFolder;
  try {
    if (kept) restore(kept, pyodide.FS, filesRoot, await keptFiles);
  } catch (err) {  // a damaged kept folder costs its files, not the boot
    console.warn(`webgrad: the kept working folder could not be restored (${err.message || err})`);
  }
  mark("files");
  const numpyFrom = await numpyLoaded;
  watch.stop();
  mark("numpy");
  stage("webgrad", "importing webgrad", 0.8);
  pyodide.runPython("import numpy");
  mark("import numpy");
  python = pyodide.pyimport("webgrad.web.worker");
  mark("webgrad");
  stage("device", "choosing the device", 0.9);
  const hooks = {
    post_progress: (data) => post({type: MSG.PROGRESS, id: current ? current.id : null, data}),
    ask_input: askInput,
    input_mode: inputBuffer ? "prompt" : "none",
    rearm_interrupt: () => {  // a signal that landed outside a run's code, kept while its run may still start
      if (control && Atomics.load(control, CONTROL.TARGET) > ended) Atomics.store(control, CONTROL.SIGNAL, CONTROL.SIGINT);
    },
  };
  let chosen;
  try {
    const info = await python.boot.callPromising(device || "auto", hooks, baseUrl, await adapter);
    chosen = info.toJs({dict_converter: Object.fromEntries, create_pyproxies: false});
    info.destroy();
  } catch (err) {
    throw new BootFailure(BOOT_CAUSES.PYTHON, `setting webgrad up failed: ${err.message || err}`,
                          "report this as a bug, with the message");
  }
  mark("device");
  for (const [step, ms] of Object.entries(chosen.timings || {})) timings[`device.${step}`] = timings.webgrad + ms;
  stage("ready", `ready (${chosen.device})`, 1);
  return {
    device: chosen.device, deviceReason: chosen.reason, adapter: chosen.adapter,
    versions: {...chosen.versions, pyodide: pyodide.version, wheel: name},
    pythonStart: interpreter.start, numpyFrom, imagesFrom, timings,
    interrupt: control ? "sharedarraybuffer" : "restart", input: inputBuffer ? "prompt" : "none",
  };
}

// An error thrown by Pyodide itself (not from the user's code, which run_cell reports).
function describeError(err) {
  const traceback = String((err && err.message) || err);
  const pythonType = (err && err.type) || null;
  const lines = traceback.trimEnd().split("\n");
  return {message: lines[lines.length - 1] || traceback, traceback, pythonType, line: null};
}

function clearSignal(id) {
  if (control && Atomics.load(control, CONTROL.TARGET) === id) Atomics.store(control, CONTROL.SIGNAL, 0);
}

// A run of Python source (run_cell) or a call of a webgrad function (call), entered the same way.
const run = ({id, code, filename}) =>
  execute(id, () => python.run_cell.callPromising(String(code), filename || "<playground>"));
const call = ({id, module, function: name, args}) =>
  execute(id, () => python.call.callPromising(String(module), String(name), args ?? []));

// The ArrayBuffers under a result (the typed arrays toJs made: copies the worker can give away).
function buffersOf(value, found = new Set()) {
  if (ArrayBuffer.isView(value)) found.add(value.buffer);
  else if (value && typeof value === "object") for (const item of Object.values(value)) buffersOf(item, found);
  return found;
}

async function execute(id, enter) {
  if (control && Atomics.load(control, CONTROL.TARGET) === id &&
      Atomics.compareExchange(control, CONTROL.SIGNAL, CONTROL.SIGINT, 0) === CONTROL.SIGINT) {
    // Interrupted before it began: it never starts. Left to Python, the signal would land in
    // Pyodide's own code that sets the run up, which can leave later runs hanging.
    ended = id;
    post({type: MSG.ERROR, id, stdout: "", stderr: "", message: "KeyboardInterrupt", traceback: "KeyboardInterrupt",
          pythonType: "KeyboardInterrupt", line: null});
    return;
  }
  current = {id, stdout: "", stderr: ""};
  if (control && Atomics.load(control, CONTROL.TARGET) !== id) Atomics.store(control, CONTROL.SIGNAL, 0);
  let out = null;
  let outcome;
  try {
    let value = await enter().finally(() => { ended = id; });
    clearSignal(id);  // a signal that lands after the cell ended belongs to no one
    if (value instanceof pyodide.ffi.PyProxy) {
      out = value;
      value = value.toJs({dict_converter: Object.fromEntries, create_pyproxies: false});
    }
    outcome = value.ok ? {type: MSG.RESULT, result: value.result ?? null, display: value.display ?? null}
      : {type: MSG.ERROR, message: value.message, traceback: value.traceback, pythonType: value.type,
         line: value.line ?? null};
  } catch (err) {
    outcome = {type: MSG.ERROR, ...describeError(err)};
  } finally {
    if (out) out.destroy();
    clearSignal(id);
  }
  try {
    // Before the page hears that the run ended: a restart right after it finds the files.
    await keepWorkingFolder();
    post({...outcome, id, stdout: current.stdout, stderr: current.stderr}, [...buffersOf(outcome.result)]);
  } finally {
    current = null;
  }
}

// Copies into the kept folder go one after another (a run's sync, an upload, a delete).
function keepInOrder(work) {
  const done = keeping.then(work);
  keeping = done.catch(() => {});
  return done;
}

// Keep what the code changed in the working folder; what the storage refused is said on stderr.
async function keepWorkingFolder() {
  if (!kept) return;
  let failed;
  try {
    failed = await keepInOrder(() => sync(kept, pyodide.FS, filesRoot));
  } catch (err) {
    failed = [`the working folder (${err && err.message || err})`];
  }
  if (failed.length) notKept(failed.join(", "));
}

function notKept(what) {
  writer("stderr").write(new TextEncoder().encode(
    `webgrad: could not keep ${what} in the browser's storage: it lasts until the page closes\n`));
}

// Working-directory files, for the page's Files panel. Paths are relative to the working folder.
function filePath(path) {
  const parts = String(path).split("/");
  if (!path || parts.some((p) => p === "" || p === "." || p === "..")) {
    throw new Error(`files: ${JSON.stringify(path)} is not a relative path inside the working directory`);
  }
  return filesRoot + "/" + parts.join("/");
}

async function files({id, op, path, data}) {
  try {
    if (!pyodide || !filesRoot) throw new Error("files: the runtime did not boot");
    let value = null;
    if (op === "list") {
      value = JSON.parse(python.list_files(filesRoot));
    } else if (op === "read") {
      value = pyodide.FS.readFile(filePath(path));
    } else if (op === "write") {
      const full = filePath(path);
      pyodide.FS.mkdirTree(full.slice(0, full.lastIndexOf("/")));
      pyodide.FS.writeFile(full, new Uint8Array(data));
      const name = full.slice(filesRoot.length + 1);
      if (kept && isKept(name)) {
        await keepInOrder(() => keepFile(kept, pyodide.FS, filesRoot, name))
          .catch((err) => notKept(`${name} (${err && err.name || err})`));
      }
    } else if (op === "delete") {
      const full = filePath(path);
      pyodide.FS.unlink(full);
      if (kept) await keepInOrder(() => forgetFile(kept, full.slice(filesRoot.length + 1))).catch(() => {});
    } else {
      throw new Error(`files: unknown op ${JSON.stringify(op)}`);
    }
    post({type: MSG.FILES, id, ok: true, value});
  } catch (err) {
    const message = err && err.errno !== undefined ? `files: ${op} ${path}: no such file or not allowed`
      : String(err && err.message || err);
    post({type: MSG.FILES, id, ok: false, message});
  }
}

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === MSG.BOOT) {
    queue = queue.then(() => boot(message)).then(
      (ready) => {
        post({type: MSG.READY, ...ready});
        keepImages(message.baseUrl).catch(() => {});  // an optimization: a failure only costs the next visit
      },
      (err) => post({type: MSG.BOOTFAIL, message: String(err && err.message || err),
                     cause: (err instanceof BootFailure && err.cause) || BOOT_CAUSES.PYTHON,
                     fix: (err instanceof BootFailure && err.fix) || ""}));
  } else if (message.type === MSG.RUN || message.type === MSG.CALL) {
    const start = message.type === MSG.RUN ? run : call;
    queue = queue.then(() => (python ? start(message) :
      post({type: MSG.ERROR, id: message.id, stdout: "", stderr: "", message: "webgrad: the runtime did not boot",
            traceback: "", pythonType: null, line: null})));
  } else if (message.type === MSG.FILES) {
    files(message);
  }
};

post({type: MSG.ALIVE});
