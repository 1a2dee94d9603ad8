/* Saving a page's changes at once, never silently over someone else's.
 *
 * const saver = new RagexpSaver({status: element, onConflict(detail), onSaved(reply)});
 * await saver.send("PUT", "/api/thing", body);
 *
 * - Each body says what it changes and what the page showed before (a compare-and-set the server
 *   decides from the file's content), so a request is safe to send again.
 * - The server answers 409 when what the page changed was changed elsewhere (another page, an
 *   editor, another server): the page shows a conflict bar with a reload button and sends
 *   nothing more.
 * - Requests go one at a time, in order. While the server is unreachable (killed, restarting) or
 *   answers 5xx, requests wait in localStorage and are retried every second; reopening the page
 *   replays them, so a closed tab loses nothing. A retry must be safe to apply twice: the server
 *   may have written a change whose reply never arrived.
 */
(function () {
  "use strict";
  const RETRY_MS = 1000;

  class RagexpSaver {
    constructor({status, onConflict, onSaved, storageKey}) {
      this.status = status || null;
      this.onConflict = onConflict || (() => {});
      this.onSaved = onSaved || (() => {});
      this.storageKey = "ragexp-pending:" + (storageKey || location.pathname);
      this.chain = Promise.resolve();
      this.conflicted = false;
      this.inFlight = 0;
    }

    show(text, kind) {
      if (!this.status) return;
      this.status.textContent = text;
      this.status.dataset.state = kind;
    }

    pending() {
      try { return JSON.parse(localStorage.getItem(this.storageKey) || "[]"); } catch (e) { return []; }
    }

    remember(list) {
      try { localStorage.setItem(this.storageKey, JSON.stringify(list)); } catch (e) { /* private mode */ }
    }

    /* Queue one request; resolves with the server's JSON reply (null after a conflict). */
    send(method, url, body) {
      const entry = {method, url, body, id: Date.now() + ":" + Math.random()};
      this.remember([...this.pending(), entry]);
      return this.enqueue(entry);
    }

    /* Replay requests a closed tab or a dead server left behind (call once the page has loaded). */
    replayPending() {
      return Promise.all(this.pending().map((entry) => this.enqueue(entry)));
    }

    enqueue(entry) {
      this.inFlight += 1;
      const run = this.chain.then(() => this.deliver(entry));
      this.chain = run.catch(() => {}).finally(() => { this.inFlight -= 1; });
      return run;
    }

    async deliver(entry) {
      if (this.conflicted) return null;
      for (;;) {
        this.show("saving…", "saving");
        let reply;
        const headers = {"Content-Type": "application/json"};
        try {
          reply = await fetch(entry.url, {
            method: entry.method, headers,
            body: entry.body === undefined ? undefined : JSON.stringify(entry.body),
          });
        } catch (err) {
          this.show("server unreachable: retrying (kept in this browser)", "offline");
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
          continue;
        }
        if (reply.status >= 500) {
          this.show(`server error ${reply.status}: retrying (kept in this browser)`, "offline");
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
          continue;
        }
        const data = await reply.json().catch(() => ({}));
        if (reply.status === 409) {
          this.conflicted = true;
          this.remember([]);
          this.show("conflict: the file changed elsewhere; reload", "conflict");
          this.onConflict(data.detail || data);
          RagexpSaver.conflictBar(data.detail || data);
          return null;
        }
        this.remember(this.pending().filter((e) => e.id !== entry.id));
        if (!reply.ok) {
          const message = (data.detail && (data.detail.message || data.detail)) || reply.statusText;
          this.show("not saved: " + message, "error");
          throw new Error(message);
        }
        this.show("saved", "saved");
        this.onSaved(data);
        return data;
      }
    }

    static conflictBar(detail) {
      let bar = document.getElementById("conflict-bar");
      if (!bar) {
        bar = document.createElement("div");
        bar.id = "conflict-bar";
        bar.className = "conflict-bar";
        bar.setAttribute("role", "alert");
        document.body.prepend(bar);
      }
      bar.textContent = "Not saved: " + ((detail && detail.message) || "the file changed elsewhere") + " ";
      const reload = document.createElement("button");
      reload.textContent = "Reload the current file";
      reload.onclick = () => location.reload();
      bar.append(reload);
    }
  }

  window.RagexpSaver = RagexpSaver;
})();
