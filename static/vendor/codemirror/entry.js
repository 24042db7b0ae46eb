export { EditorView, basicSetup } from "codemirror";
export { EditorState } from "@codemirror/state";
export { keymap, hoverTooltip } from "@codemirror/view";
export { yaml } from "@codemirror/lang-yaml";
export { autocompletion } from "@codemirror/autocomplete";
export { linter, lintGutter, setDiagnostics, forceLinting } from "@codemirror/lint";
export { HighlightStyle, syntaxHighlighting } from "@codemirror/language";
export { tags } from "@lezer/highlight";
