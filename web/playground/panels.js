// panels.js: the Files panel (what the code wrote under the working directory; downloads,
// uploads by drag-and-drop or the Upload button) and the Models panel (the server's model
// store: load, delete, download, embed).
import {embedSnippet, engineNote, ownCodeClasses} from "../widget/snippet.js";

export const CLIENT_HEADER = {"X-Webgrad-Client": "1"};  // the server refuses writes without it

function button(text, onClick, title = "") {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = text;
  if (title) element.title = title;
  element.addEventListener("click", onClick);
  return element;
}

export function download(name, bytes, type = "application/octet-stream") {
  const url = URL.createObjectURL(new Blob([bytes], {type}));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function size(bytes) {
  return bytes < 1024 ? `${bytes} B` : bytes < 1 << 20 ? `${(bytes / 1024).toFixed(1)} KB` :
    `${(bytes / (1 << 20)).toFixed(1)} MB`;
}

export class FilesPanel {
  constructor({list, drop, picker, status, getRuntime}) {
    this.list = list;
    this.status = status;
    this.getRuntime = getRuntime;
    drop.addEventListener("dragover", (event) => { event.preventDefault(); drop.classList.add("over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      drop.classList.remove("over");
      this.upload(event.dataTransfer.files);
    });
    picker.addEventListener("change", () => { this.upload(picker.files); picker.value = ""; });
  }

  async upload(files) {
    const runtime = this.getRuntime();
    if (!runtime) return;
    for (const file of files) {
      await runtime.files.write(file.name, new Uint8Array(await file.arrayBuffer()));
      this.status.textContent = `uploaded ${file.name}: open("${file.name}") reads it`;
    }
    await this.refresh();
  }

  async refresh() {
    const runtime = this.getRuntime();
    if (!runtime) return;
    let files;
    try {
      files = await runtime.files.list();
    } catch (err) {
      this.status.textContent = String(err.message || err);
      return;
    }
    this.list.textContent = "";
    for (const file of files) {
      const item = document.createElement("li");
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = file.path;
      const info = document.createElement("span");
      info.className = "size";
      info.textContent = size(file.size);
      const save = button("Download", async () => {
        download(file.path.split("/").pop(), await runtime.files.read(file.path));
      }, `download ${file.path}`);
      item.append(name, info, save);
      this.list.append(item);
    }
    if (!files.length) this.list.innerHTML = '<li class="empty">no files yet: code that writes files (open, webgrad.save) shows them here</li>';
  }
}

export class ModelsPanel {
  /**
   * @param {{list: HTMLElement, status: HTMLElement, snippet: HTMLElement,
   *          onLoad: (name: string, options: {trustCode: boolean}) => any}} parts
   *   onLoad pulls the model into the runtime (with trust_code=True when trustCode)
   */
  constructor({list, status, snippet, onLoad}) {
    this.list = list;
    this.status = status;
    this.snippet = snippet;
    this.onLoad = onLoad;
  }

  async refresh() {
    let models;
    try {
      // Revalidated, not refetched: the server answers 304 while no model changed.
      const response = await fetch("/api/models", {cache: "no-cache"});
      if (!response.ok) throw new Error(`GET /api/models answered ${response.status}`);
      models = (await response.json()).models;
    } catch (err) {
      this.status.textContent = `the model store is not reachable: ${err.message || err}`;
      return;
    }
    this.status.textContent = models.length ? "" : "no stored models: webgrad.store.push(model, \"name\") adds one";
    this.list.textContent = "";
    for (const model of models) {
      const item = document.createElement("li");
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = model.name;
      const info = document.createElement("span");
      info.className = "size";
      info.textContent = size(model.size);
      const actions = document.createElement("span");
      actions.className = "actions";
      actions.append(
        button("Load", () => this.load(model), `pull ${model.name} into the runtime as \`model\``),
        this.downloadLink(model),
        button("Embed", () => this.showEmbed(model), "show the HTML that embeds this model in another page"),
        button("Delete", () => this.remove(model.name), `delete ${model.name} from the store`));
      item.append(name, info, actions);
      this.list.append(item);
    }
  }

  /** Pull the model; one built by its author's own classes runs their code, so ask first. */
  load(model) {
    const classes = ownCodeClasses(model);
    if (!classes.length) return this.onLoad(model.name, {trustCode: false});
    const question = `${model.name} is built by its author's own Python code (${classes.join(", ")}). Loading it `
      + "runs that code in this page's Python. Load it only if you trust whoever pushed it. Run it?";
    if (!window.confirm(question)) {
      this.status.textContent = `not loaded: ${model.name} needs its own code (${classes.join(", ")}) to run`;
      return null;
    }
    return this.onLoad(model.name, {trustCode: true});
  }

  // Through a link with a download attribute, not a navigation: the file is saved as
  // NAME.safetensors (a plain navigation to .../weights was saved as "weights").
  downloadLink(model) {
    const file = `${model.name}.safetensors`;
    return button("Download", () => {
      const link = document.createElement("a");
      link.href = model.weights_url || `/api/models/${encodeURIComponent(model.name)}/weights`;
      link.download = file;
      document.body.append(link);
      link.click();
      link.remove();
    }, `download ${file} (the weights)`);
  }

  async remove(name) {
    if (!window.confirm(`Delete the stored model ${name}?`)) return;
    const response = await fetch(`/api/models/${encodeURIComponent(name)}`, {method: "DELETE", headers: CLIENT_HEADER});
    await this.refresh();
    this.status.textContent = response.ok ? `deleted ${name}` : `deleting ${name} failed: ${response.status}`;
  }

  /** The snippet for `model` (a GET /api/models record): trust-code, with its comment, when it needs it;
   * beside it, what the widget runs the model on (its web bundle's size, or why Python). */
  showEmbed(model) {
    this.snippet.querySelector("pre").textContent = embedSnippet({origin: window.location.origin, name: model.name,
                                                                  info: model});
    this.snippet.querySelector(".engine").textContent = engineNote(model);
    this.snippet.hidden = false;
    this.snippet.querySelector("button").focus();
  }
}
