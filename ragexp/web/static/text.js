/* Document text on a page, character for character as the server counts it.
 *
 * The server's offsets (evidence spans, passages, search matches) count Unicode code points, as
 * Python's str does; JS strings count UTF-16 code units, one more for every character outside the
 * Basic Multilingual Plane (most emoji).
 *
 * The pages' one rendering path: every value reaches the DOM as a text node (el() below), never as
 * markup, so stored data cannot become script or markup, and the DOM holds exactly the text the
 * offsets index (the HTML parser would turn "\r\n" into "\n" and drop NUL).
 *
 * RagexpText.chars(text)            the code points of text (index them with the server's offsets)
 * RagexpText.points(text, units)    the code-point offset of UTF-16 offset `units` in text
 * RagexpText.el(tag, props, ...children)
 *                                   a new element: props set as properties (className, title,
 *                                   dataset: {...}, ...), children appended, strings as text nodes
 */
(function () {
  "use strict";
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "dataset") Object.assign(node.dataset, value);
      else node[key] = value;
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined && child !== false) node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  window.RagexpText = {
    chars: (text) => Array.from(String(text)),
    points: (text, units) => Array.from(String(text).slice(0, units)).length,
    el,
  };
})();
