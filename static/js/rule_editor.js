// The rule editor: CodeMirror 6 (vendored, window.CM) over the form's textarea, which stays
// the value the form posts. YAML highlighting; completion and hover from the hints endpoint
// (rules/schema.json keys, modifiers, event columns, features); the server's validation
// (htmx, on every change) drawn as line:col markers in the gutter and under the text.
(function () {
  "use strict";
  const holder = document.querySelector(".rule-code");
  if (!holder || !window.CM) return;
  const textarea = holder.querySelector("textarea");
  const validation = document.getElementById("validation");
  const {EditorView, basicSetup, EditorState, yaml, autocompletion, lintGutter, setDiagnostics, hoverTooltip,
    HighlightStyle, syntaxHighlighting, tags: t} = window.CM;
  // Token colours as CSS variables (app.css sets them per colour scheme, each AA on its
  // background): CodeMirror's default style is light-only and unreadable on the dark editor.
  const tokenColours = HighlightStyle.define([
    {tag: t.meta, color: "var(--cm-meta)"},
    {tag: t.keyword, color: "var(--cm-keyword)"},
    {tag: [t.atom, t.bool, t.url, t.contentSeparator, t.labelName], color: "var(--cm-atom)"},
    {tag: [t.literal, t.inserted, t.number], color: "var(--cm-literal)"},
    {tag: [t.string, t.deleted], color: "var(--cm-string)"},
    {tag: [t.regexp, t.escape, t.special(t.string)], color: "var(--cm-escape)"},
    {tag: [t.definition(t.propertyName), t.propertyName], color: "var(--cm-key)"},
    {tag: [t.typeName, t.namespace], color: "var(--cm-type)"},
    {tag: t.comment, color: "var(--cm-comment)", fontStyle: "italic"},
    {tag: t.invalid, color: "var(--cm-invalid)"},
  ]);
  let hints = {keys: [], nested: {}, modifiers: [], columns: [], features: []};
  fetch(holder.dataset.hints, {credentials: "same-origin"}).then(r => r.json()).then(h => { hints = h; });

  const byName = list => Object.fromEntries(list.map(h => [h.name, h]));
  const option = (h, type) => ({label: h.name, type, info: h.doc || undefined});

  // The top-level key a line sits under (the nearest line above it at column 0).
  function parentKey(state, lineNo) {
    const indent = state.doc.line(lineNo).text.search(/\S|$/);
    for (let n = lineNo - 1; n >= 1; n--) {
      const text = state.doc.line(n).text;
      const lead = text.search(/\S/);
      if (lead < 0 || text.trimStart().startsWith("#")) continue;
      if (lead < indent) {
        if (lead === 0) { const m = /^([\w-]+):/.exec(text); return m ? m[1] : null; }
        return parentKey(state, n) === "match" ? "selection" : parentKey(state, n);
      }
    }
    return null;
  }

  function complete(context) {
    const line = context.state.doc.lineAt(context.pos);
    const before = line.text.slice(0, context.pos - line.from);
    const mod = /\|(\w*)$/.exec(before);
    if (mod) {
      return {from: context.pos - mod[1].length, options: hints.modifiers.map(h => option(h, "keyword"))};
    }
    const from = /^\s*from:\s*(\w*)$/.exec(before);
    if (from) {
      return {from: context.pos - from[1].length, options: hints.features.map(h => option(h, "function"))};
    }
    const value = /^(\w+):\s+(\w*)$/.exec(before);
    if (value) {
      const key = byName(hints.keys)[value[1]];
      if (key && key.values.length) {
        return {from: context.pos - value[2].length, options: key.values.map(v => ({label: v, type: "enum"}))};
      }
      return null;
    }
    const word = /^(\s*)([\w.]*)$/.exec(before);
    if (!word || (!context.explicit && !word[2])) return null;
    const parent = word[1].length ? parentKey(context.state, line.number) : null;
    let options;
    if (!parent) options = hints.keys.map(h => option(h, "property"));
    else if (parent === "selection") {
      options = [{label: "from", type: "keyword", info: "read a feature's table instead of the events"}]
        .concat(hints.columns.map(h => option(h, "variable")));
    } else if (hints.nested[parent]) options = hints.nested[parent].map(h => option(h, "property"));
    else return null;
    return {from: context.pos - word[2].length, options};
  }

  // Hover: a top-level key, a modifier after |, a feature after from:, an event column.
  const hover = hoverTooltip((view, pos) => {
    const line = view.state.doc.lineAt(pos);
    const at = pos - line.from;
    const re = /[\w.]+/g;
    let m;
    while ((m = re.exec(line.text))) {
      if (m.index > at || m.index + m[0].length < at) continue;
      const prev = line.text.slice(0, m.index);
      const word = m[0];
      let hint = null, kind = "";
      if (prev.endsWith("|")) { hint = byName(hints.modifiers)[word]; kind = "modifier"; }
      else if (/^\s*from:\s*$/.test(prev)) { hint = byName(hints.features)[word]; kind = "feature"; }
      else if (!prev.trim()) {
        hint = prev.length ? byName(hints.columns)[word.split(".")[0]] : byName(hints.keys)[word];
        kind = prev.length ? "column" : "key";
        const parent = prev.length ? parentKey(view.state, line.number) : null;
        if (parent && hints.nested[parent]) { hint = byName(hints.nested[parent])[word]; kind = parent + " key"; }
      }
      if (!hint) return null;
      return {pos: line.from + m.index, end: line.from + m.index + word.length, above: true, create() {
        const dom = document.createElement("div");
        dom.className = "rule-hover";
        const title = document.createElement("strong");
        title.textContent = `${kind} ${word}`;
        dom.append(title, document.createElement("br"), hint.doc || "");
        return {dom};
      }};
    }
    return null;
  });

  const view = new EditorView({
    parent: holder,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [basicSetup, yaml(), syntaxHighlighting(tokenColours), EditorView.lineWrapping, lintGutter(),
        autocompletion({override: [complete], activateOnTyping: true}), hover,
        EditorView.contentAttributes.of({"aria-label": "Rule (YAML)"}),
        EditorView.updateListener.of(update => {
          if (!update.docChanged) return;
          textarea.value = update.state.doc.toString();
          textarea.dispatchEvent(new Event("editor-change"));
        })],
    }),
  });
  textarea.hidden = true;
  holder.classList.add("has-editor");

  // The validation partial lists errors as <li data-line data-col>: the same ones become markers.
  function showMarkers() {
    const doc = view.state.doc;
    const diagnostics = [...validation.querySelectorAll("li[data-line]")].map(li => {
      const line = doc.line(Math.min(Math.max(+li.dataset.line, 1), doc.lines));
      const from = Math.min(line.from + Math.max(+li.dataset.col - 1, 0), line.to);
      const word = /^[^\s:]*/.exec(doc.sliceString(from, line.to))[0];
      return {from, to: Math.max(from + word.length, Math.min(from + 1, line.to)), severity: "error",
        message: li.querySelector(".message").textContent};
    });
    view.dispatch(setDiagnostics(view.state, diagnostics));
  }
  document.body.addEventListener("htmx:afterSwap", e => { if (e.target === validation) showMarkers(); });
  showMarkers();
})();
