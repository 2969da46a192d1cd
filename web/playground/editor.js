// editor.js: the CodeMirror 6 editor: Python highlighting, line numbers, wrapped long lines, Tab indents
// (Escape then Tab moves focus on), Ctrl/Cmd+Enter runs, and a mark on the failing line.
import {basicSetup} from "codemirror";
import {indentWithTab} from "@codemirror/commands";
import {indentUnit} from "@codemirror/language";
import {python} from "@codemirror/lang-python";
import {EditorState, Prec, StateEffect, StateField} from "@codemirror/state";
import {Decoration, EditorView, keymap} from "@codemirror/view";

const markError = StateEffect.define();  // value: a line number, or null to clear

const errorLine = StateField.define({
  create: () => Decoration.none,
  update(marks, tr) {
    marks = marks.map(tr.changes);
    for (const effect of tr.effects) {
      if (effect.is(markError)) {
        const line = effect.value;
        marks = Decoration.none;
        if (typeof line === "number" && line >= 1 && line <= tr.state.doc.lines) {
          const from = tr.state.doc.line(line).from;
          marks = Decoration.set([Decoration.line({class: "cm-error-line"}).range(from)]);
        }
      }
    }
    if (tr.docChanged) marks = Decoration.none;  // the code changed: the mark no longer applies
    return marks;
  },
  provide: (field) => EditorView.decorations.from(field),
});

/** An editor in `parent`; onRun() on Ctrl/Cmd+Enter, onChange(text) after edits. */
export function createEditor(parent, {doc, onRun, onChange}) {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        basicSetup,
        python(),
        indentUnit.of("    "),
        errorLine,
        // Long lines (comments, above all) wrap: the pane is narrow, and a sideways scrollbar at the
        // foot of a tall editor left their ends out of sight.
        EditorView.lineWrapping,
        Prec.highest(keymap.of([{key: "Mod-Enter", run: () => { onRun(); return true; }}])),
        keymap.of([indentWithTab]),
        EditorView.updateListener.of((update) => { if (update.docChanged) onChange(update.state.doc.toString()); }),
        EditorView.contentAttributes.of({"aria-label": "Python code"}),
      ],
    }),
  });
  return {
    view,
    get text() { return view.state.doc.toString(); },
    /** Replace the code (undoable with Ctrl+Z). */
    setText(text) {
      view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}});
    },
    markError(line) {
      view.dispatch({effects: markError.of(line ?? null)});
      if (line) {
        const at = view.state.doc.line(Math.min(line, view.state.doc.lines)).from;
        view.dispatch({effects: EditorView.scrollIntoView(at, {y: "center"})});
      }
    },
    focus() { view.focus(); },
  };
}
