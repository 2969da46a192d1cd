// main.js: the playground page (/). Bundled by the asset step into /build/playground.js.
// Wires the editor, the runtime (../runtime/webgrad.js), output, charts, files and models.
import "uplot/dist/uPlot.min.css";
import "./playground.css";
import {boot, DEVICES, StoppedError} from "../runtime/webgrad.js";
import {Charts} from "./charts.js";
import {codeFromHash, linkFor, savedCode, saveCode} from "./code_store.js";
import {createEditor} from "./editor.js";
import {Output} from "./output.js";
import {download, FilesPanel, ModelsPanel} from "./panels.js";

const $ = (id) => /** @type {any} */ (document.getElementById(id));
const output = new Output($("output"));
const charts = new Charts($("charts"));
let runtime = null;
let running = false;
let lastStep = null;

// ----------------------------------------------------------------------------- device

function requestedDevice() {
  const asked = new URLSearchParams(location.search).get("device");
  if (asked === null || asked === "") return "auto";
  if (DEVICES.includes(asked)) return asked;
  warn(`?device=${asked} is not a device (choose ${DEVICES.join(", ")}): using auto.`);
  return "auto";
}

function warn(text) {
  const box = $("warning");
  box.hidden = false;
  box.textContent = box.textContent ? `${box.textContent} ${text}` : text;
}

// ----------------------------------------------------------------------------- status

function setStatus(text, kind = "") {
  $("status").textContent = text;
  $("status").className = `status ${kind}`;
}

function showProgress(data) {
  if (!data || typeof data !== "object") return;
  charts.add(data);
  $("csv").disabled = false;
  if (typeof data.step === "number") lastStep = data.step;
  let fraction = data.fraction;
  if (fraction === undefined && data.total) fraction = data.step / data.total;
  if (typeof fraction === "number") $("progress").value = Math.max(0, Math.min(1, fraction));
  const parts = [];
  if (data.message) parts.push(data.message);
  if (data.step !== undefined) parts.push(`step ${data.step}${data.total ? "/" + data.total : ""}`);
  for (const [key, value] of Object.entries(data)) {
    if (!["step", "total", "fraction"].includes(key) && typeof value === "number") parts.push(`${key} ${value.toPrecision(4)}`);
  }
  if (running) setStatus(parts.join("  "));
}

function setRunning(on) {
  running = on;
  $("run").disabled = on || !runtime;
  $("stop").disabled = !on;
}

// ----------------------------------------------------------------------------- runtime

// `why`: what a run in progress is told when the old runtime stops (a device switch).
async function startRuntime(device, why = "the runtime restarted") {
  if (runtime) runtime.terminate(why);
  runtime = null;
  window.webgradRuntime = undefined;
  setRunning(false);
  $("run").disabled = true;
  $("boot").classList.remove("done");
  $("device").textContent = "booting…";
  $("device").className = "badge";
  try {
    const started = await boot({
      device,
      onBoot: ({stage, message, fraction}) => {  // also after a restart
        $("boot-progress").value = fraction;
        $("boot-label").textContent = message;
        $("boot").classList.toggle("done", stage === "ready");
      },
    });
    runtime = started;
  } catch (err) {
    window.webgradBootError = err.message || String(err);
    $("device").textContent = "boot failed";
    $("device").className = "badge error";
    $("boot-label").textContent = "boot failed";
    output.append(`${err.message || err}\n`, "error");
    return;
  }
  for (const warning of runtime.warnings) warn(warning);
  runtime.on("progress", showProgress);
  runtime.on("stdout", (text) => output.append(text));
  runtime.on("stderr", (text) => output.append(text, "stderr"));
  runtime.on("restart", ({reason}) => {
    output.append(reason === "user" ? "— restarted: a fresh interpreter (variables are gone, files are kept) —\n" :
      "— the worker was restarted to stop the run; earlier variables are gone, files are kept —\n", "note");
    showDevice();
    filesPanel.refresh();
  });
  showDevice();
  $("boot").classList.add("done");
  window.webgradRuntime = runtime;  // for the console (and the browser tests)
  setRunning(false);
  filesPanel.refresh();
}

function showDevice() {
  $("device").textContent = runtime.device;
  $("device").className = `badge ${runtime.device}`;
  $("device").title = runtime.deviceReason;
  const v = runtime.versions;
  $("versions").textContent = `Pyodide ${v.pyodide}, webgrad ${v.webgrad}, booted in ${(runtime.bootMs / 1000).toFixed(1)} s ` +
    `on ${runtime.device}: ${runtime.deviceReason}.`;
}

// ----------------------------------------------------------------------------- running code

async function runCode(code = editor.text) {
  if (!runtime || running) return;
  setRunning(true);
  charts.reset();
  $("csv").disabled = true;
  lastStep = null;
  $("progress").value = 0;
  editor.markError(null);
  setStatus("running…");
  const started = performance.now();
  try {
    const {display} = await runtime.run(code, {filename: "<playground>"});
    if (display) output.display(display);
    setStatus(`done in ${((performance.now() - started) / 1000).toFixed(2)} s`, "done");
  } catch (err) {
    if (err instanceof StoppedError) {  // e.g. the device changed: the user's choice, not a failure
      const text = `stopped${lastStep === null ? "" : ` at step ${lastStep}`}: ${err.reason}`;
      output.append(`— ${text} —\n`, "stopped");
      setStatus(text, "stopped");
    } else if (err.pythonType === "KeyboardInterrupt") {
      const text = lastStep === null ? "stopped" : `stopped at step ${lastStep}`;
      output.append(`${text}\n`, "stopped");
      setStatus(text, "stopped");
    } else {
      output.append(`${err.traceback || err.message}\n`, "error");
      setStatus(`failed: ${err.message.split("\n").pop()}`, "failed");
      if (err.line) editor.markError(err.line);
    }
  } finally {
    output.flush();
    setRunning(false);
    filesPanel.refresh();
    if (/webgrad\.store\.(push|delete)/.test(code)) modelsPanel.refresh();
  }
}

// ----------------------------------------------------------------------------- wiring

const initial = (await codeFromHash()) ?? savedCode() ?? await exampleCode("regression");
if (location.hash.startsWith("#code/")) {
  saveCode(initial);
  history.replaceState(null, "", location.pathname + location.search);  // reloads keep later edits
}
const editor = createEditor($("editor"), {
  doc: initial,
  onRun: () => { runCode(); },
  onChange: (text) => saveCode(text),
});

async function exampleCode(name) {
  const response = await fetch(`/playground/examples/${name}.py`);
  if (!response.ok) throw new Error(`example ${name}: ${response.status}`);
  return response.text();
}

const filesPanel = new FilesPanel({list: $("files"), drop: $("drop"), picker: $("file-picker"),
                                   status: $("files-status"), getRuntime: () => runtime});
const modelsPanel = new ModelsPanel({
  list: $("models"), status: $("models-status"), snippet: $("embed"),
  onLoad: (name, {trustCode}) => runCode(`import webgrad\nmodel = webgrad.store.pull(${JSON.stringify(name)}`
    + `${trustCode ? ", trust_code=True" : ""})\nmodel`),  // trustCode: the Models panel asked the person first
});

$("run").addEventListener("click", () => runCode());
document.addEventListener("keydown", (event) => {  // Ctrl/Cmd+Enter runs from anywhere on the page
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.defaultPrevented) {
    event.preventDefault();
    runCode();
  }
});
$("stop").addEventListener("click", () => { if (runtime) runtime.interrupt(); });
$("clear").addEventListener("click", () => output.clear());
$("csv").addEventListener("click", () => download("progress.csv", charts.csv(), "text/csv"));
$("files-refresh").addEventListener("click", () => filesPanel.refresh());
$("models-refresh").addEventListener("click", () => modelsPanel.refresh());
$("restart").addEventListener("click", async () => {
  if (!runtime) return startRuntime($("device-picker").value);
  $("restart").disabled = true;
  try { await runtime.restart(); } finally { $("restart").disabled = false; }
});
$("examples").addEventListener("change", async () => {
  const name = $("examples").value;
  if (!name) return;
  editor.setText(await exampleCode(name));
  $("examples").value = "";
  editor.focus();
});
$("share").addEventListener("click", async () => {
  const link = await linkFor(editor.text);
  $("share-box").hidden = false;
  $("share-link").value = link;
  $("share-link").select();
  try {
    await navigator.clipboard.writeText(link);
    setStatus("link copied");
  } catch {
    setStatus("copy the link above");
  }
});
$("embed-copy").addEventListener("click", async () => {
  try { await navigator.clipboard.writeText($("embed").querySelector("pre").textContent); } catch { /* shown anyway */ }
});
$("embed-close").addEventListener("click", () => { $("embed").hidden = true; });
$("device-picker").addEventListener("change", () => {
  const device = $("device-picker").value;
  const url = new URL(location.href);
  url.searchParams.set("device", device);
  history.replaceState(null, "", url);
  startRuntime(device, `the device changed to ${device}`);
});

window.webgradPlayground = {editor, charts, output};  // for the console (and the browser tests)
const device = requestedDevice();
$("device-picker").value = device;
modelsPanel.refresh();
document.body.dataset.ready = "true";
await startRuntime(device);
