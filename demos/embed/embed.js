// The host page's own script: import the widget from the webgrad server and embed a model.
// It logs the element's events (ready, prediction, error) on the page and keeps them in
// window.embedEvents, where the tests read them.
const params = new URLSearchParams(location.search);
const host = (params.get("webgrad") || "http://127.0.0.1:8000").replace(/\/$/, "");
const name = params.get("model") || "digits-mlp";
const input = params.get("input");  // e.g. ?input=none; without it the element picks the UI that fits the model
const events = [];
window.embedEvents = events;

function log(type, detail) {
  events.push({type, detail});
  const item = document.createElement("li");
  item.textContent = `${type}: ${typeof detail === "string" ? detail : JSON.stringify(detail).slice(0, 160)}`;
  document.getElementById("events").append(item);
}

try {
  await import(`${host}/widget.js`);
  const element = document.createElement("webgrad-model");
  element.setAttribute("src", `${host}/api/models/${name}`);
  if (input) element.setAttribute("input", input);
  element.addEventListener("ready", (event) => {
    document.getElementById("state").textContent = `ready: ${event.detail.name}, input ${event.detail.input_shape}`;
    log("ready", {name: event.detail.name, labels: event.detail.labels});
  });
  element.addEventListener("prediction", (event) => log("prediction", {label: event.detail.label}));
  element.addEventListener("error", (event) => {
    document.getElementById("state").textContent = event.detail.message;
    log("error", event.detail.message);
  });
  document.getElementById("slot").append(element);
} catch (error) {
  document.getElementById("state").textContent = `could not load ${host}/widget.js: ${error.message}`;
  log("error", error.message);
}
