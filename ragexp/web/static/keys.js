/* Keyboard-first pages: one map from keys to actions, and a "?" overlay listing them.
 *
 * RagexpKeys.bind([{key: "j", help: "next item", run: fn}, {key: "Ctrl+Enter", ...}, {key: "Shift+x", ...}]);
 *
 * A key is named by its modifiers (Ctrl, Alt, Meta, and Shift for a letter: "X" is "Shift+x")
 * and the key, lowercased when it is one character ("?" stays "?").
 * Plain keys are ignored while the focus is in a text field (typing stays typing); keys with
 * Ctrl/Alt/Meta and Escape work everywhere. Escape also leaves a text field.
 */
(function () {
  "use strict";
  const bindings = [];

  function name(event) {
    const parts = [];
    if (event.ctrlKey) parts.push("Ctrl");
    if (event.altKey) parts.push("Alt");
    if (event.metaKey) parts.push("Meta");
    const letter = event.key.length === 1 && event.key.toLowerCase() !== event.key.toUpperCase();
    if (event.shiftKey && letter) parts.push("Shift");
    parts.push(event.key.length === 1 ? event.key.toLowerCase() : event.key);
    return parts.join("+");
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  function toggleHelp() {
    let overlay = document.getElementById("keys-help");
    if (overlay) { overlay.remove(); return; }
    overlay = document.createElement("div");
    overlay.id = "keys-help";
    overlay.className = "keys-help";
    const table = document.createElement("table");
    for (const b of bindings) {
      const row = table.insertRow();
      const kbd = document.createElement("kbd");
      kbd.textContent = b.key;
      row.insertCell().append(kbd);
      row.insertCell().textContent = b.help;
    }
    const title = document.createElement("h2");
    title.textContent = "Keys";
    const closing = document.createElement("p");
    closing.textContent = "? or Escape closes this.";
    overlay.append(title, table, closing);
    document.body.append(overlay);
  }

  document.addEventListener("keydown", (event) => {
    const key = name(event);
    const modified = event.ctrlKey || event.altKey || event.metaKey || event.key === "Escape";
    if (typing(event.target) && !modified) return;
    if (key === "?" || (key === "Escape" && document.getElementById("keys-help"))) {
      if (key === "?" || document.getElementById("keys-help")) { toggleHelp(); event.preventDefault(); return; }
    }
    const binding = bindings.find((b) => b.key === key);
    if (binding) {
      event.preventDefault();
      binding.run(event);
    } else if (key === "Escape" && typing(event.target)) {
      event.target.blur();
    }
  });

  window.RagexpKeys = {
    bind(list) { bindings.push(...list); },
    bindings,
    toggleHelp,
  };
})();
