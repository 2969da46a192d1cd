// /widget.js: embed a stored webgrad model in any page (ES module).
//
//   <script type="module" src="http://HOST/widget.js"></script>
//   <webgrad-model src="http://HOST/api/models/digits-mlp" input="canvas"></webgrad-model>
//
// or from JavaScript:
//   import {load} from "http://HOST/widget.js";
//   const model = await load("http://HOST/api/models/digits-mlp", {device: "cpu"});
//   const {outputs, shape, probabilities, label} = await model.predict(new Float32Array(64));
//   model.info   // {input_shape, output_shape, labels, metadata, ...}; model.dispose()
//
// The code lives in widget/ (model.js: load and Model; element.js: <webgrad-model>).
import {WebgradModelElement} from "./widget/element.js";

export {load, Model, WidgetError} from "./widget/model.js";
export {WebgradModelElement};

if (!customElements.get("webgrad-model")) customElements.define("webgrad-model", WebgradModelElement);
