"""A ragexp page server (``evalset annotate``, ``judge review``) as a real subprocess for browser tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.cli import ENV


def start_page(cwd: Path, args: list[str], timeout_s: float = 300) -> tuple[subprocess.Popen, str]:
    """``python -m ragexp.cli *args`` in its own process group; returns it and the URL it prints
    (fails with its output when it exits or prints none within ``timeout_s``)."""
    proc = subprocess.Popen([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"{' '.join(args[:2])} exited {proc.wait()}: {''.join(lines)[-2000:]}")
        lines.append(line)
        if (found := re.search(r"http://127\.0\.0\.1:\d+/", line)) is not None:
            return proc, found.group(0)
    raise AssertionError(f"no URL within {timeout_s:.0f} s: {''.join(lines)[-2000:]}")


def stop_page(server: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL after 20 s; nothing when it already exited."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


_TEXT_BOX_JS = """async ([selector, text]) => {
    const root = document.querySelector(selector);
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let full = "", nodes = [];
    while (walker.nextNode()) { nodes.push([walker.currentNode, full.length]); full += walker.currentNode.data; }
    const at = full.indexOf(text);
    if (at < 0) return null;
    const locate = (offset) => { for (let i = nodes.length - 1; i >= 0; i--) if (nodes[i][1] <= offset) return [nodes[i][0], offset - nodes[i][1]]; };
    const rectOf = (offset) => { const [node, o] = locate(offset); const r = document.createRange(); r.setStart(node, o); r.setEnd(node, o + 1); return r.getClientRects()[0]; };
    root.scrollIntoView({block: "center"});
    const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
    for (let last = null, still = 0, n = 0; still < 3 && n < 120; n++) {  // the layout has stopped moving
        await frame();
        const top = root.getBoundingClientRect().top;
        still = top === last ? still + 1 : 0;
        last = top;
    }
    const first = rectOf(at), last = rectOf(at + text.length - 1);
    return {x1: first.left + 1, y1: first.top + first.height / 2, x2: last.right - 1, y2: last.top + last.height / 2};
}"""


def text_box(page, container_selector: str, text: str) -> dict:
    """Where the first occurrence of ``text`` inside the element is drawn, scrolled into view:
    ``x1, y1`` (its first character) and ``x2, y2`` (its last)."""
    box = page.evaluate(_TEXT_BOX_JS, [container_selector, text])
    assert box is not None, f"{text!r} not shown in {container_selector}"
    return box


def drag_select(page, container_selector: str, text: str) -> None:
    """Drag the mouse over the first occurrence of ``text`` inside the element, as a person selects."""
    box = text_box(page, container_selector, text)
    page.mouse.move(box["x1"], box["y1"])
    page.mouse.down()
    page.mouse.move(box["x2"], box["y2"], steps=5)
    page.mouse.up()


def settled_save_state(page, timeout_ms: float) -> str:
    """Wait until the page's save status (``#save-status``, saving.js) settles on "saved",
    "conflict" or "error" and return it (a page state, not a sleep)."""
    page.wait_for_function("() => ['saved', 'conflict', 'error'].includes(document.getElementById('save-status').dataset.state)",
                           timeout=timeout_ms)
    return page.locator("#save-status").get_attribute("data-state")


_HIDDEN_LINES_JS = """(selector) => {
    const scroller = (e) => { for (let p = e.parentElement; p; p = p.parentElement) {
        const o = getComputedStyle(p).overflowY; if ((o === "auto" || o === "scroll") && p.scrollHeight > p.clientHeight) return p; }
        return null; };
    const hidden = [];
    for (const e of document.querySelectorAll(selector)) {
        const line = e.getBoundingClientRect(), box = scroller(e);
        const top = box ? Math.max(0, box.getBoundingClientRect().top) : 0;
        const bottom = box ? Math.min(innerHeight, box.getBoundingClientRect().bottom) : innerHeight;
        const x = line.left + 6, y = line.top + 6;
        if (y < top || y > bottom) continue;  // scrolled out of its own box: not shown, not covered
        const at = document.elementFromPoint(x, y);
        if (!at || !e.contains(at)) hidden.push({text: e.textContent.slice(0, 40), y, under: at ? (at.id || at.className || at.tagName) : null});
    }
    return hidden;
}"""


def hidden_first_lines(page, selector: str) -> list[dict]:
    """The elements matching ``selector`` whose first line lies in the part of the page where it
    should be seen (inside its scroll box, or the window) but has another element drawn over it."""
    return page.evaluate(_HIDDEN_LINES_JS, selector)
