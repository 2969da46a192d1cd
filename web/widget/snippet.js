// snippet.js: the HTML that embeds a stored model in another page, exactly as an Embed
// button shows it (the playground's Models panel, the demos' Embed).
//
//   embedSnippet({origin: "http://HOST", name: "char-lm", info}) ->
//     <script type="module" src="http://HOST/widget.js"></script>
//     <!-- trust-code: ... -->
//     <webgrad-model src="http://HOST/api/models/char-lm" trust-code></webgrad-model>
//
// `info` is either the record GET /api/models/NAME answers ({name, metadata: {..., webgrad:
// {architecture, input, ...}}, ...}) or the flat dict webgrad.store.info returns ({code,
// has_architecture, input, ...}); both say which of the model's classes are its author's own
// code. The snippet names no `input` attribute: the element picks the UI from the model's
// recorded input (see element.js), so the snippet stays right when the model is re-pushed.
// engineNote(info) is the line shown beside it: which engine the widget will run the model on
// (its web bundle and the bundle's size, or the Python runtime and why).

/**
 * The names of the model's own Python classes (code the widget must run to rebuild it).
 * @param {any} info  a GET /api/models/NAME record or a webgrad.store.info dict
 * @returns {string[]}
 */
export function ownCodeClasses(info) {
  if (Array.isArray(info?.code)) return info.code.map(String);  // webgrad.store.info's flat form
  const code = info?.metadata?.webgrad?.architecture?.code;
  if (!Array.isArray(code)) return [];
  return code.filter((entry) => entry && entry.kind === "class").map((entry) => String(entry.name));
}

/**
 * The model's recorded input ({kind: "image"|"vector"|"points"|"tokens", ...}) or null.
 * @param {any} info  a GET /api/models/NAME record or a webgrad.store.info dict
 */
export function inputRecord(info) {
  return info?.input ?? info?.metadata?.webgrad?.input ?? null;
}

// Names are [A-Za-z0-9_.-] on the server, but the snippet is HTML: escape anyway.
function attribute(text) {
  return String(text).replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * The embed snippet for the stored model `name` on the webgrad server at `origin`: a script
 * tag loading /widget.js and a <webgrad-model> element, with `trust-code` (and a comment
 * saying what it allows) when the architecture includes the author's own classes.
 * @param {{origin: string, name: string, info?: any}} options
 * @returns {string}
 */
export function embedSnippet({origin, name, info = null}) {
  if (typeof origin !== "string" || !/^https?:\/\//.test(origin)) {
    throw new TypeError(`embedSnippet: origin must be the server's http(s) origin, got ${JSON.stringify(origin)}`);
  }
  if (typeof name !== "string" || !name) throw new TypeError("embedSnippet: name must be the stored model's name");
  const base = origin.replace(/\/+$/, "");
  const classes = ownCodeClasses(info);
  const lines = [`<script type="module" src="${attribute(base)}/widget.js"></script>`];
  let attrs = "";
  if (classes.length) {
    const names = classes.map((c) => c.replace(/[^\w.]/g, "")).join(", ");  // nothing that could end the comment
    lines.push(`<!-- trust-code: this model is built by its author's own Python code (${names}); `
      + "the attribute lets the widget run that code in this page's worker. Keep it only for models whose "
      + "author you trust. -->");
    attrs = " trust-code";
  }
  lines.push(`<webgrad-model src="${attribute(base)}/api/models/${attribute(encodeURIComponent(name))}"${attrs}>`
    + "</webgrad-model>");
  return lines.join("\n");
}

/** Bytes as people read them: 900 B, 54 KB, 1.3 MB. @param {number} bytes */
export function byteSize(bytes) {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1e6) return `${Math.round(bytes / 1000)} KB`;
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/**
 * What the embedded widget runs the model on, for the line beside the snippet: "lite bundle,
 * 54 KB — no Python in the page", or "Python runtime: <why the model has no bundle>".
 * @param {any} info  a GET /api/models/NAME record or a webgrad.store.info dict (both carry lite, lite_reason)
 * @returns {string}
 */
export function engineNote(info) {
  const lite = info?.lite;
  if (lite && typeof lite.bytes === "number") return `lite bundle, ${byteSize(lite.bytes)} — no Python in the page`;
  return `Python runtime: ${info?.lite_reason || "the model has no web bundle"}`;
}
