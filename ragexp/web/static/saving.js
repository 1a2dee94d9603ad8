/* Saving a page's changes at once, never silently over someone else's, never losing one.
 *
 * const saver = new RagexpSaver({status: element, onConflict(detail), onSaved(reply), onTheirs(detail)});
 * await saver.send("PUT", "/api/thing", body);
 *
 * - Each body says what it changes and what the page showed before (a compare-and-set the server
 *   decides from the file's content, ragexp/web/edit_session.py), so a request is safe to send again.
 * - The server answers 409 when what the page changed was changed elsewhere (another page, an
 *   editor, another server), with the stored values ("theirs"). The conflict bar shows yours and
 *   theirs, field by field, and waits: "Keep mine" sends the change again over theirs (with the
 *   "before" the server named), "Take theirs" drops it and shows the file (onTheirs; default: reload).
 *   Later changes wait behind the decision, kept in localStorage; nothing is sent or dropped without
 *   it. A change that cannot be kept (the corpus changed under the page: no "theirs") is dropped
 *   with a bar that says so; later changes go on.
 * - Requests go one at a time, in order. While the server is unreachable (killed, restarting) or
 *   answers 5xx, requests wait in localStorage and are retried every second; reopening the page
 *   replays them, so a closed tab loses nothing. A retry must be safe to apply twice: the server
 *   may have written a change whose reply never arrived.
 */
(function () {
  "use strict";
  const RETRY_MS = 1000;

  class RagexpSaver {
    constructor({status, onConflict, onSaved, onTheirs, storageKey}) {
      this.status = status || null;
      this.onConflict = onConflict || (() => {});
      this.onSaved = onSaved || (() => {});
      this.onTheirs = onTheirs || (() => location.reload());
      this.storageKey = "ragexp-pending:" + (storageKey || location.pathname);
      this.chain = Promise.resolve();
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
          const detail = data.detail || data;
          this.onConflict(detail);
          if (!detail.before) {  // cannot be kept: dropped, said so
            this.remember(this.pending().filter((e) => e.id !== entry.id));
            this.show("conflict: the file changed elsewhere; reload", "conflict");
            RagexpSaver.conflictBar(detail);
            return null;
          }
          this.show("conflict: keep yours or take theirs (bar below)", "conflict");
          const keep = await RagexpSaver.ask(detail, entry.body, this.pending().length - 1);
          if (keep) {
            entry.body = {...entry.body, before: detail.before};
            this.remember(this.pending().map((e) => (e.id === entry.id ? entry : e)));
            continue;
          }
          this.remember(this.pending().filter((e) => e.id !== entry.id));
          this.show("took theirs", "saved");
          this.onTheirs(detail);
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

    static bar(detail) {
      let bar = document.getElementById("conflict-bar");
      if (!bar) {
        bar = document.createElement("div");
        bar.id = "conflict-bar";
        bar.className = "conflict-bar";
        bar.setAttribute("role", "alert");
        document.body.prepend(bar);
      }
      bar.textContent = "Not saved: " + ((detail && detail.message) || "the file changed elsewhere") + " ";
      return bar;
    }

    static button(text, onclick) {
      const button = document.createElement("button");
      button.textContent = text;
      button.onclick = onclick;
      return button;
    }

    /* A change that cannot be kept: the bar says so, with a reload. */
    static conflictBar(detail) {
      RagexpSaver.bar(detail).append(RagexpSaver.button("Reload the current file", () => location.reload()));
    }

    /* Yours and theirs, field by field; resolves true for "Keep mine", false for "Take theirs". */
    static ask(detail, body, waiting) {
      const shown = (value) => { const text = typeof value === "string" ? value : JSON.stringify(value); return text.length > 400 ? text.slice(0, 400) + "…" : text; };
      const mine = body.changes || body;
      const bar = RagexpSaver.bar(detail);
      const table = document.createElement("table");
      table.className = "conflict-fields";
      for (const [field, theirs] of Object.entries(detail.theirs || {})) {
        const row = table.insertRow();
        row.insertCell().textContent = field;
        row.insertCell().textContent = "yours: " + shown(mine[field]);
        row.insertCell().textContent = "theirs: " + shown(theirs);
      }
      bar.append(table);
      if (waiting > 0) bar.append(`${waiting} later change(s) wait for this decision. `);
      return new Promise((resolve) => {
        const decide = (keep) => () => { bar.remove(); resolve(keep); };
        bar.append(RagexpSaver.button("Keep mine", decide(true)), " ",
                   RagexpSaver.button("Take theirs (reload the current file)", decide(false)));
      });
    }
  }

  window.RagexpSaver = RagexpSaver;
})();
