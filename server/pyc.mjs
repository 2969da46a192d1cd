// Compiles a wheel's Python files to bytecode with Pyodide's own interpreter, so
// the browser imports webgrad without compiling it (about 60% of the import's time).
// Run by server/wheel.py:  node server/pyc.mjs <node_modules/pyodide/> <unpacked wheel>
// The folder is mounted where the page installs wheels (site-packages), so each
// code object's file name is the page's path and tracebacks show the source.
// The .pyc files are unchecked-hash: used as they are, whatever the source's mtime
// after unpacking (they ship in the same wheel as the source they came from).
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pyodideDir, folder] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({ indexURL: pyodideDir + path.sep, stdout: () => {}, stderr: console.error });
const sitePackages = pyodide.runPython("import site; site.getsitepackages()[0]");
pyodide.FS.mkdirTree(sitePackages);
pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: path.resolve(folder) }, sitePackages);
const ok = pyodide.runPython(`
import compileall, py_compile, sys
ok = compileall.compile_dir(${JSON.stringify(sitePackages)}, quiet=1, workers=1,
                            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
bool(ok)
`);
if (!ok) {
  console.error("compileall reported errors");
  process.exit(1);
}
