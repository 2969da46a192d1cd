// /widget.js: embed a stored webgrad model in any page (ES module).
//
//   <script type="module" src="http://HOST/widget.js"></script>
//   <webgrad-model src="http://HOST/api/models/digits-mlp"></webgrad-model>
//
// The element shows the UI that fits the model's recorded input (a drawing pad, number
// fields, a plane to click, a text box that generates); input="canvas" | "fields" | "plane" |
// "text" | "none" picks one. Models built by their author's own classes need `trust-code` to
// run in Python (a web bundle holds no code, so on the lite engine they load without it).
//
// or from JavaScript:
//   import {load} from "http://HOST/widget.js";
//   const model = await load("http://HOST/api/models/digits-mlp", {device: "cpu"});
//   const {outputs, shape, probabilities, label} = await model.predict(new Float32Array(64));
//   await lm.predict([[1, 2, 3]]); await lm.generate("Shall I", {length: 80, temperature: 0.8})
//   model.info   // {engine: "lite" | "python", input_shape, output_shape, labels, metadata, ...}; model.dispose()
//
// A model stored with its web bundle (webgrad.store.push exports one) runs on /lite.js, without
// Python in the page; any other is rebuilt in Python (Pyodide in a worker; info.lite_reason says why).
//
// The code lives in widget/ (model.js: load and Model; engines.js: the lite and Python engines;
// element.js: <webgrad-model>, with pad.js, fields.js, plane.js, text.js for its UIs; snippet.js:
// the embed snippet and the line beside it).
import {WebgradModelElement} from "./widget/element.js";

export {load, Model, WidgetError} from "./widget/model.js";
export {WebgradModelElement};

if (!customElements.get("webgrad-model")) customElements.define("webgrad-model", WebgradModelElement);
