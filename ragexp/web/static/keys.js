/* Keyboard-first pages: one map from keys to actions, and a "?" overlay listing them.
 *
 * RagexpKeys.bind([{key: "j", help: "next item", run: fn}, {key: "Ctrl+Enter", ...}, {key: "Shift+x", ...}]);
 *
 * A key is named by its modifiers (Ctrl, Alt, Meta, and Shift for a letter: "X" is "Shift+x")
 * and the key, lowercased when it is one character ("?" stays "?").
 *
 * Text fields: a plain key pressed while the focus is in a text field is typed there (single-key
 * commands never act, and never type, while typing); only keys with Ctrl/Alt/Meta work there too.
 * A field is left explicitly: Escape leaves any text field and keeps what it holds (also a search
 * box, whose browser default would clear it); a field marked data-exit="enter" (a one-line answer)
 * is left by Enter as well (Shift+Enter types a line break). After leaving, the next key is a
 * command again. RagexpKeys.leaving(field) says how a field is left, for the page to show.
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

  /* How the person leaves a text field (shown while typing in it). */
  function leaving(field) { return field && field.dataset.exit === "enter" ? "Enter or Esc" : "Esc"; }

  document.addEventListener("keydown", (event) => {
    const key = name(event);
    if (typing(event.target) && event.target.dataset.exit === "enter" && key === "Enter") {
      event.preventDefault();  // Enter leaves a one-line field (Shift+Enter is a line break)
      event.target.blur();
      return;
    }
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
      event.preventDefault();  // a search box's default clears it: Escape leaves, the text stays
      event.target.blur();
    }
  });

  window.RagexpKeys = {
    bind(list) { bindings.push(...list); },
    bindings,
    toggleHelp,
    typing,
    leaving,
  };
})();
