// Pyodide's memory right after Python has started, for the page to restore instead of
// starting Python itself (about 1 s of every boot, cold or warm). Run by server/assets.py:
//     node server/snapshot.mjs <node_modules/pyodide/> <output.gz>
// The snapshot also holds the standard-library modules that loading numpy and importing
// webgrad need (those in Pyodide's main wasm or pure Python; numpy's own shared libraries
// cannot be in a memory snapshot, so numpy loads as before).
// What stays the build machine's: the str hash seed, sys._emscripten_info.runtime and
// $LANG. What must not, the page puts right after restoring (web/runtime/worker.js):
// `random`'s seed and the time zone.
import path from "node:path";
import fs from "node:fs";
import zlib from "node:zlib";
import { pathToFileURL } from "node:url";

const MODULES = [
  "__future__", "base64", "calendar", "csv", "dataclasses", "datetime", "email.message", "email.utils",
  "hashlib", "hmac", "html", "importlib.metadata", "json", "numbers", "pickle", "platform", "quopri",
  "secrets", "tarfile",
];

const [pyodideDir, output] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({
  indexURL: pyodideDir + path.sep, _makeSnapshot: true, stdout: () => {}, stderr: console.error,
});
// `_` is node's script path, which emscripten put in the environment.
pyodide.runPython(`import os, ${MODULES.join(", ")}\nos.environ.pop("_", None)`);
fs.writeFileSync(output, zlib.gzipSync(pyodide.makeMemorySnapshot(), { level: 6 }));
