/* Document text on a page, character for character as the server counts it.
 *
 * The server's offsets (evidence spans, passages, search matches) count Unicode code points, as
 * Python's str does; JS strings count UTF-16 code units, one more for every character outside the
 * Basic Multilingual Plane (most emoji). And the HTML parser turns "\r\n" into "\n" and drops NUL,
 * so text put into innerHTML is not the text the offsets index.
 *
 * RagexpText.chars(text)            the code points of text (index them with the server's offsets)
 * RagexpText.points(text, units)    the code-point offset of UTF-16 offset `units` in text
 * RagexpText.html(text)             text escaped for innerHTML so the DOM holds exactly text
 *                                   (CR and NUL as character references; NUL shows as U+FFFD)
 */
(function () {
  "use strict";
  const ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;", "\0": "&#65533;"};

  window.RagexpText = {
    chars: (text) => Array.from(String(text)),
    points: (text, units) => Array.from(String(text).slice(0, units)).length,
    html: (text) => String(text).replace(/[&<>"\r\0]/g, (c) => ENTITIES[c]),
  };
})();
