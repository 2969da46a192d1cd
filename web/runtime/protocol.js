// protocol.js: the one message protocol between a page (runtime/webgrad.js) and the
// worker (runtime/worker.js). Every message is a plain object with a `type`; this
// module names the types and the shared-memory layouts, and is imported by both
// sides (and by the playground, demos and widget for the constants they need).
//
//   page -> worker
//     boot   {baseUrl, device, control, input, keepFiles}
//              baseUrl: site root (…/ with pyodide/, wheels/ below it).
//              control: Int32Array(2) over a SharedArrayBuffer, or null (see CONTROL).
//              input:   SharedArrayBuffer for input() answers, or null (see INPUT).
//              keepFiles: true, false or a folder name: the working folder kept in the origin
//                private file system (kept_files.js)
//     run    {id, code, filename}     run Python source (top-level await allowed)
//     call   {id, module, function, args}  call module.function(*args) (webgrad.web.worker.call):
//              only webgrad's own modules and modules already imported from the working
//              folder (webgrad.web.worker.resolve); args are structured-cloned, typed arrays and
//              ArrayBuffers (transferred when the page says so) reach Python as memoryviews.
//              Answered by `result` (result: the return value, one-dimensional numpy arrays and
//              bytes as typed arrays, their buffers transferred) or `error`, as a run is.
//     files  {id, op: "list"|"read"|"write"|"delete", path, data}
//              working-directory files; answered by a `files` message with the same id (a write
//              or delete once it is kept)
//
//   worker -> page
//     alive    {}                        the worker script loaded (sent before boot starts)
//     boot     {stage, message, fraction}  boot progress
//     ready    {device, deviceReason, adapter, versions, pythonStart, numpyFrom, imagesFrom, timings, interrupt,
//              input}
//              pythonStart: "snapshot" (Python restored from the server's memory snapshot) or "fresh"
//              numpyFrom: "image" (numpy's files prepared by the asset step, with bytecode) or "wheel"
//              imagesFrom: {snapshot, numpy, webgrad}: "cache" (the worker's Cache API, kept by an
//              earlier visit) or "network" (the HTTP cache included); absent when not used
//              timings: {step: ms from the start of boot at which it ended}, steps overlapping:
//              wheel, adapter, snapshot, numpy image, pyodide.mjs, pyodide, numpy, unpack, import numpy, webgrad,
//              device, files (the kept working folder restored), device.*
//     bootfail {message, cause, fix}     boot failed; cause is one of BOOT_CAUSES
//     progress {id, data}                webgrad_progress(dict) during run `id`
//     stdout / stderr {id, text}         output as it is written
//     input    {id, prompt}              Python called input(); answer via the INPUT buffer
//     result   {id, stdout, stderr, result, display}   (result and error: once the files the run wrote are kept)
//     error    {id, stdout, stderr, message, traceback, pythonType, line}
//     files    {id, ok, value, message}

export const MSG = Object.freeze({
  BOOT: "boot", RUN: "run", CALL: "call", FILES: "files",
  ALIVE: "alive", READY: "ready", BOOTFAIL: "bootfail", PROGRESS: "progress",
  STDOUT: "stdout", STDERR: "stderr", INPUT: "input", RESULT: "result", ERROR: "error",
});

export const DEVICES = Object.freeze(["auto", "webgpu", "cpu"]);

// Why a boot failed (bootfail.cause), so pages can react to each.
export const BOOT_CAUSES = Object.freeze({
  CSP: "csp",            // WebAssembly compilation refused by the Content-Security-Policy
  ASSET: "asset",        // a file (worker, Pyodide, wheel) answered an error status
  WORKER: "worker",      // the Web Worker could not be started
  TIMEOUT: "timeout",    // the worker never answered
  PYTHON: "python",      // Python failed while setting webgrad up
});

// The interrupt control block: Int32Array [signal read by Pyodide, id of the run it is aimed at].
export const CONTROL = Object.freeze({SIGNAL: 0, TARGET: 1, SIGINT: 2, LENGTH: 2});

// input() answers: Int32Array view [state, byte length], then UTF-8 bytes from DATA_OFFSET.
// The worker sets state WAITING and blocks in Atomics.wait; the page writes the answer and
// sets ANSWERED (or CANCELLED) and notifies.
export const INPUT = Object.freeze({STATE: 0, LENGTH: 1, DATA_OFFSET: 8, BYTES: 1 << 16,
                                    WAITING: 1, ANSWERED: 2, CANCELLED: 3});

// Which WebAssembly stack-switching (JSPI) API this runtime has, as Pyodide tells them apart.
// Python's start records it, so a memory snapshot (server/snapshot.mjs, which imports this
// module) is restored only where the kind matches (worker.js).
export function jspiKind() {
  return "Suspending" in WebAssembly ? "new" : "Suspender" in WebAssembly ? "old" : "none";
}
