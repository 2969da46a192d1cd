// Pyodide's memory right after Python has started, for the page to restore instead of
// starting Python itself (about 1 s of every boot, cold or warm). A module worker that
// server/assets.py runs in headless Chromium, served next to Pyodide's files: the snapshot
// is made by the kind of runtime that restores it, since Python's start records what that
// runtime offers (WebAssembly stack switching, JSPI, which run_sync and WebGPU need).
// It also holds the standard-library modules that loading numpy and importing webgrad need
// (numpy's own shared libraries cannot be in a memory snapshot, so numpy loads as before).
// What stays the build's: the str hash seed and sys._emscripten_info.runtime. What must
// not, the page puts right after restoring (web/runtime/worker.js): `random`'s seed and the
// time zone.
import { loadPyodide } from "./pyodide.mjs";
import { jspiKind } from "./protocol.js";  // web/runtime/protocol.js

const MODULES = [
  "__future__", "base64", "calendar", "csv", "dataclasses", "datetime", "email.message", "email.utils",
  "hashlib", "hmac", "html", "importlib.metadata", "json", "numbers", "pickle", "platform", "quopri",
  "secrets", "tarfile",
];

try {
  const pyodide = await loadPyodide({
    indexURL: new URL("./", import.meta.url).href, _makeSnapshot: true, stdout: () => {}, stderr: () => {},
  });
  pyodide.runPython(`import ${MODULES.join(", ")}`);
  const snapshot = pyodide.makeMemorySnapshot();
  const memory = new Blob([snapshot]).stream().pipeThrough(new CompressionStream("gzip"));
  const gzip = await new Response(memory).arrayBuffer();
  // The size lets the page make Pyodide's instance while the snapshot downloads (worker.js).
  postMessage({gzip, jspi: jspiKind(), size: snapshot.length}, [gzip]);
} catch (err) {
  postMessage({error: String((err && err.stack) || err)});
}

