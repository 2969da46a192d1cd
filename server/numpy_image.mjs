// numpy's files as the page installs them, in one archive the page writes straight into
// Pyodide's file system (web/runtime/worker.js, installNumpyImage), with bytecode.
// Why: loadPackage("numpy") unpacks its wheel in Python (about 270 ms of a boot), and the
// wheel has no bytecode, so `import numpy` compiled its source on every visit (about 200 ms).
// Run by server/assets.py:  node server/numpy_image.mjs <node_modules/pyodide/> <numpy wheel> <out>
// The wheel is unpacked by Pyodide's own loader (the one loadPackage runs), which also names
// its shared libraries; the .pyc files are unchecked-hash, compiled by Pyodide's CPython with
// the page's paths as file names (tracebacks show the source, which ships too).
// Archive: a 4-byte little-endian header length, the header (JSON: {wheel, files: [[path,
// size], ...], dynlibs: [path, ...]}, paths relative to site-packages), then the files' bytes
// in order; gzipped (node's gzip writes no time stamp, so the same inputs give the same bytes).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import zlib from "node:zlib";

const [pyodideDir, wheelPath, out] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({ indexURL: pyodideDir + path.sep, stdout: () => {}, stderr: console.error });
const sitePackages = pyodide.runPython("import site; site.getsitepackages()[0]");
const stage = "/tmp/numpy-image";
const wheel = path.basename(wheelPath);
const found = pyodide._api.package_loader.unpack_buffer.callKwargs({
  buffer: new Uint8Array(fs.readFileSync(wheelPath)), filename: wheel, extract_dir: stage,
  installer: "pyodide.loadPackage", source: "pyodide", calculate_dynlibs: true,
});
const dynlibs = Array.from(found, (p) => path.posix.relative(stage, p));  // (a JS array already)
pyodide.globals.set("stage", stage);
pyodide.globals.set("site_packages", sitePackages);
const listing = pyodide.runPython(`
import compileall, os, py_compile
if not compileall.compile_dir(stage, ddir=site_packages, quiet=1, workers=1,
                              invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH):
    raise SystemExit("compileall reported errors")
files = []
for root, dirs, names in os.walk(stage):
    dirs.sort()
    files += [os.path.relpath(os.path.join(root, n), stage) for n in sorted(names)]
files
`).toJs();
const sizes = listing.map((rel) => pyodide.FS.stat(`${stage}/${rel}`).size);
const header = Buffer.from(JSON.stringify({ wheel, files: listing.map((rel, i) => [rel, sizes[i]]), dynlibs }));
const length = Buffer.alloc(4);
length.writeUInt32LE(header.length);
const parts = [length, header, ...listing.map((rel) => Buffer.from(pyodide.FS.readFile(`${stage}/${rel}`)))];
fs.writeFileSync(out, zlib.gzipSync(Buffer.concat(parts), { level: 6 }));
