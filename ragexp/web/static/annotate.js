/* The annotation page: one question at a time, every change saved at once (saving.js). */
(function () {
  "use strict";
  const CATEGORIES = ["paraphrase", "synonym", "multi-chunk", "boundary"];
  /* What an editable field holds when the entry does not set it (session.py DEFAULTS). */
  const DEFAULTS = {evidence: [], gold_answer: "", key_facts: [], tags: [], answerable: true, skipped: false,
                    confirmed: false, reviewed: false};
  const $ = (id) => document.getElementById(id);
  const state = {entries: [], current: null, candidates: [], candidatesOf: null, focus: -1, coverage: null, generation: 0,
                 pending: [], dragging: false, renderHeld: false};
  const shownPassage = new WeakMap();  // a passage box on the page -> the passage it shows (its offsets)
  let saver = null;
  let lastSave = Promise.resolve();  // the newest save's reply (done() decides on the saved entry)
  const unanswered = [];  // changes sent whose reply has not come yet: {id, changes}, in order

  const el = RagexpText.el;  // every value reaches the page as a text node (text.js)

  function entry() { return state.entries.find((e) => e.id === state.current) || null; }
  /* Spans of an entry that no longer read their quote in the live corpus (after a corpus edit, or
     what `ragexp evalset reanchor` could not move): a person re-marks them, so the page opens on them. */
  function staleSpans(e) { return Object.keys(e.stale || {}).length; }

  /* A line under the question that says why a key did nothing, or what it also did. */
  function say(text) { $("page-message").textContent = text || ""; }

  async function getJSON(url) {
    const reply = await fetch(url);
    if (!reply.ok) throw new Error(`${url}: ${reply.status}`);
    return reply.json();
  }

  /* --- loading --- */

  async function load() {
    const data = await getJSON("/api/state");
    if (!saver) {
      saver = new RagexpSaver({status: $("save-status"), storageKey: data.evalset, onTheirs: refresh});
      if (saver.pending().length) saver.replayPending().then(refresh);  // what a closed tab or a dead server left
    }
    state.entries = data.entries;
    state.coverage = data.coverage;
    state.generation = data.corpus_generation;
    state.adjudicator = data.adjudicator;
    $("file").textContent = data.evalset;
    const wanted = decodeURIComponent(location.hash.slice(1));
    const first = state.entries.find((e) => e.id === wanted) || state.entries.find((e) => staleSpans(e)) ||
      state.entries.find((e) => e.status === "open" || e.status === "review") || state.entries[0];
    renderQueue();
    renderCoverage();
    if (first) await open(first.id);
  }

  /* The files as they are now (after a replay, or "take theirs"), the current question kept. */
  async function refresh() {
    const data = await getJSON("/api/state");
    state.entries = data.entries;
    state.coverage = data.coverage;
    renderQueue();
    renderCoverage();
    if (entry()) { renderItem(); renderCandidates(); renderReason(); }
  }

  /* The server's entry, with the changes still on their way on top (they are this page's newest). */
  function applyReply(reply) {
    if (reply.entry) {
      const fresh = reply.entry;
      for (const sent of unanswered) if (sent.id === fresh.id) Object.assign(fresh, sent.changes);
      const index = state.entries.findIndex((e) => e.id === fresh.id);
      if (index >= 0) state.entries[index] = fresh; else state.entries.push(fresh);
    }
    if (reply.coverage) state.coverage = reply.coverage;
    renderQueue();
    renderCoverage();
    if (reply.entry && reply.entry.id === state.current) { renderItem(); renderCandidates(); renderReason(); }
  }

  async function open(id) {
    flushFields();  // a pending answer belongs to the question it was typed for
    const active = document.activeElement;
    if (active && ["gold", "facts", "search", "new-query"].includes(active.id)) active.blur();
    state.current = id;
    history.replaceState(null, "", "#" + encodeURIComponent(id));
    const e = entry();
    $("query").textContent = e.query;
    $("entry-source").textContent = `${e.id} · source: ${e.source || "not recorded"}`;
    renderReason();
    state.searchHits = null;
    state.document = null;
    say("");
    $("search").value = "";
    $("search-results").replaceChildren();
    $("document-panel").hidden = true;
    renderQueue();
    renderItem();
    state.candidates = [];
    state.candidatesOf = null;
    state.pending = [];
    $("candidates").replaceChildren(el("p", {className: "muted"}, "pooling candidates…"));
    await loadCandidates(id);
  }

  /* The question's candidates; while pipelines are still being built (a cold start: the lexical
     one answers first) the pool is asked again every 2 s and grows in place: the passages shown
     keep their order and the focus stays on the same passage. */
  async function loadCandidates(id) {
    let data = null;
    while (data === null) {  // a restarting server: try again until it answers (or another question is opened)
      data = await getJSON(`/api/entries/${encodeURIComponent(id)}/candidates`).catch(() => null);
      if (state.current !== id) return;
      if (data === null) await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    const focused = state.candidatesOf === id ? state.candidates[state.focus] : null;
    state.candidates = data.candidates;
    state.candidatesOf = id;
    state.pending = data.pending || [];
    const refocus = focused ? state.candidates.findIndex((p) => p.unit_id === focused.unit_id) : -1;
    state.focus = refocus >= 0 ? refocus : state.candidates.length ? 0 : -1;
    $("candidates-title").textContent = data.kind === "review" ? "Passages to judge" : "Candidate passages";
    const dropped = data.heading_only ? `; ${data.heading_only} heading-only left out` : "";
    const growing = state.pending.length ? `; still pooling ${state.pending.join(", ")}: more passages will appear` : "";
    const failed = Object.entries(data.failed || {}).map(([name, why]) => `; ${name} not pooled (${why})`).join("");
    $("candidates-note").textContent = data.kind === "review" ? `(${data.candidates.length})`
      : `(${data.candidates.length}, pooled from several pipelines, shuffled${dropped}${growing}${failed})`;
    renderCandidates();
    if (state.pending.length) setTimeout(() => { if (state.current === id) loadCandidates(id); }, 2000);
  }

  function renderReason() {
    const e = entry();
    $("review-reason").textContent = e && e.review && !e.reviewed
      ? `Judge these queued passages (${e.pending} not judged yet): ${e.review.reason}; Ctrl+Enter when done` : "";
  }

  /* --- saving --- */

  /* Send the new values and the ones the person saw ("before"): the server applies a field only
     when it still holds "before", answers "already so" when it holds the new value (a retry
     after a lost reply), and 409 otherwise (changed on another page). */
  function save(changes) {
    const e = entry();
    const before = {};
    for (const key of Object.keys(changes)) before[key] = JSON.parse(JSON.stringify(e[key] ?? DEFAULTS[key]));
    Object.assign(e, changes);
    const sent = {id: e.id, changes};
    unanswered.push(sent);
    const answered = () => unanswered.splice(unanswered.indexOf(sent), 1);
    renderItem();
    renderCandidates();
    lastSave = saver.send("PUT", `/api/entries/${encodeURIComponent(e.id)}`, {changes, before}).then(
      (reply) => { answered(); if (reply) applyReply(reply); return reply; },
      (err) => { answered(); throw err; });
    return lastSave;
  }

  function setEvidence(evidence) { return save({evidence, confirmed: true, skipped: false}); }

  function sameSpan(a, b) { return a.doc_id === b.doc_id && a.start === b.start && a.end === b.end; }

  function addSpan(span) {
    const e = entry();
    const evidence = e.evidence.filter((x) => !sameSpan(x, span));
    evidence.push(span);
    return setEvidence(evidence);
  }

  /* --- passages and selection --- */

  function passageNode(p, index, kind) {
    const e = entry();
    const chars = RagexpText.chars(p.before + p.text + p.after);  // offsets count code points (text.js)
    const textStart = p.context_start, textEnd = textStart + chars.length;
    const cuts = new Set([textStart, p.start, p.end, textEnd]);
    const clip = (x) => Math.min(textEnd, Math.max(textStart, x));
    const hits = kind === "hit" ? (p.matches || [[p.start, p.end]]).map(([a, b]) => [clip(a), clip(b)]) : [];
    hits.forEach(([a, b]) => { cuts.add(a); cuts.add(b); });
    const marks = (e ? e.evidence : []).filter((x) => x.doc_id === p.doc_id && x.start != null && (x.grade ?? 1) >= 1
                                                && x.start < textEnd && x.end > textStart);
    marks.forEach((m) => { cuts.add(Math.max(textStart, m.start)); cuts.add(Math.min(textEnd, m.end)); });
    const points = [...cuts].sort((a, b) => a - b);
    const text = el("div", {className: "passage-text", dataset: {doc: p.doc_id, base: String(textStart)}});
    for (let i = 0; i + 1 < points.length; i++) {
      const a = points[i], b = points[i + 1];
      if (a >= b) continue;
      let piece = chars.slice(a - textStart, b - textStart).join("");
      if (marks.some((m) => m.start <= a && m.end >= b)) piece = el("mark", {className: "pos"}, piece);
      else if (hits.some(([s, t]) => s <= a && t >= b)) piece = el("mark", {className: "hit"}, piece);
      if (a < p.start || b > p.end) piece = el("span", {className: "context"}, piece);
      text.append(piece);
    }
    const negative = e && e.evidence.some((x) => (x.grade ?? 1) === 0 && sameSpan(x, p));
    const positive = marks.length > 0;
    const classes = ["passage", negative ? "negative" : "", positive ? "positive" : ""].filter(Boolean).join(" ");
    const same = (p.same_text || []).length;
    const head = el("div", {className: "passage-head"},
      el("span", {className: "title"}, p.title || p.doc_id),
      el("span", {className: "muted"}, p.doc_id, p.page ? ` · ${p.page}` : ""),
      same ? el("span", {className: "same-text", title: `the same text: ${p.same_text.join(", ")}`},
        `identical text ×${same + 1}`) : null,
      verdictBadges(p),
      el("span", {className: "buttons"},
        el("button", {dataset: {act: "relevant"}, title: "r"}, "relevant"),
        el("button", {dataset: {act: "negative"}, title: "x"}, negative ? "judged not relevant" : "not relevant"),
        el("button", {dataset: {act: "document"}, title: "o"}, "document")));
    const path = (p.headings || []).length
      ? el("div", {className: "heading-path muted small"}, p.headings.join(" › ")) : null;
    const box = el("div", {className: classes + adjudicationClasses(p), dataset: {kind, index: String(index)}}, head, path, text);
    shownPassage.set(box, p);
    return box;
  }

  /* --- adjudication: two annotators' verdicts side by side, the adjudicator's own apart --- */

  /* The open question's adjudication record (names and each side's fields), while it is being adjudicated. */
  function adjudicating(e = entry()) { return e && e.review && !e.reviewed ? e.review.adjudication || null : null; }

  function verdictClass(v) { return v.grade === null ? "not-judged" : v.grade >= 1 ? "relevant" : "not-relevant"; }

  function verdictText(v) {
    if (v.grade === null) return v.how === "unanswerable" ? "unanswerable, not judged" : "not judged";
    if (v.grade === 0) return "not relevant";
    const how = {within: ", a span within", around: ", a span around it", overlap: ", a span overlapping it",
                 document: ", whole document"}[v.how] || "";
    return `relevant${v.grade > 1 ? ` (grade ${v.grade})` : ""}${how}`;
  }

  /* The adjudicator's verdict on passage p: the grade of the span over it, else none yet. */
  function mine(p) {
    const e = entry();
    const span = e ? e.evidence.find((x) => sameSpan(x, p)) : null;
    return span ? verdictText({grade: span.grade ?? 1, how: "span"}) : "not judged yet";
  }

  function verdictBadges(p) {
    const record = adjudicating();
    if (!record || !p.verdicts) return null;
    return el("span", {className: "verdicts"},
      ...record.names.map((n, i) => el("span", {className: `verdict ${verdictClass(p.verdicts[i])}`}, `${n}: ${verdictText(p.verdicts[i])}`)),
      el("span", {className: "mine"}, `yours: ${mine(p)}`));
  }

  function adjudicationClasses(p) {
    if (!adjudicating() || !p.verdicts) return "";
    return ` adjudicated first-${verdictClass(p.verdicts[0])} second-${verdictClass(p.verdicts[1])}`;
  }

  /* The fields the two annotators gave differently, side by side; an answer or key facts can be taken. */
  function renderAdjudication() {
    const record = adjudicating();
    $("adjudication").hidden = !record;
    if (!record) return;
    const by = el("p", {className: "adjudicator"}, `adjudicating as ${state.adjudicator || "(no adjudicator named)"}: `
      + "decide every disputed passage and field below");
    const yesNo = (v) => (v ? "answerable" : "unanswerable");
    const rows = [];
    const differ = (key) => JSON.stringify(record[key][0]) !== JSON.stringify(record[key][1]);
    if (differ("answerable")) rows.push(["answerable", ...record.answerable.map(yesNo), null]);
    if (differ("gold_answer")) rows.push(["gold answer", ...record.gold_answer, "gold_answer"]);
    if (differ("key_facts")) rows.push(["key facts", ...record.key_facts.map((f) => f.join("\n")), "key_facts"]);
    if (differ("tags")) rows.push(["tags", ...record.tags.map((t) => t.join(", ")), null]);
    const take = (field, side) => el("button", {dataset: {take: field, side: String(side)}}, "take");
    $("adjudication").replaceChildren(by, el("table", {},
      el("tr", {}, el("th", {}, ""), ...record.names.map((n) => el("th", {}, n))),
      ...rows.map(([label, a, b, field]) => el("tr", {}, el("td", {}, label),
        ...[a, b].map((value, side) => el("td", {}, value || "—", " ", field && value ? take(field, side) : null))))));
  }
  $("adjudication").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-take]");
    const record = adjudicating();
    if (!button || !record) return;
    const value = record[button.dataset.take][Number(button.dataset.side)];
    if (button.dataset.take === "key_facts" && entry().answerable === false) {
      say("this question is unanswerable: no key facts (u to change it)");
      return;
    }
    save({[button.dataset.take]: value});
  });

  /* Why Ctrl+Enter cannot settle the question yet (null when it can): the server's reason, on the saved entry. */
  function adjudicationUnsettled(e) { return adjudicating(e) ? e.unsettled || null : null; }

  function renderCandidates() {
    if (state.dragging) { state.renderHeld = true; return; }  // a selection in progress keeps its passages
    state.renderHeld = false;
    $("candidates").replaceChildren(...(state.candidates.length ? state.candidates.map((p, i) => passageNode(p, i, "candidate"))
      : [el("p", {className: "muted"}, "no candidate: search the corpus below")]));
    if (state.searchHits) {
      $("search-results").replaceChildren(...(state.searchHits.length ? state.searchHits.map((p, i) => passageNode(p, i, "hit"))
        : [el("p", {className: "muted"}, "not found")]));
    }
    if (state.document) $("document").replaceChildren(passageNode(state.document, 0, "document"));
    focusCandidate(state.focus, false);
  }

  /* The passage a box shows (the one it was drawn from, even if the lists changed since). */
  function passageOf(el) {
    const box = el.closest(".passage");
    return box ? shownPassage.get(box) || null : null;
  }

  function focusCandidate(index, scroll = true) {
    document.querySelectorAll("#candidates .passage").forEach((el) => el.classList.remove("focused"));
    if (index < 0 || index >= state.candidates.length) return;
    state.focus = index;
    const el = document.querySelector(`#candidates .passage[data-index="${index}"]`);
    if (el) { el.classList.add("focused"); if (scroll) el.scrollIntoView({block: "nearest"}); }
  }

  function textOffset(container, node, offset) {
    const range = document.createRange();
    range.setStart(container, 0);
    range.setEnd(node, offset);
    return range.toString().length;
  }

  /* A drag that starts in a passage holds every re-render of the passages (a save's reply, search
     results, a pool that grew) until the mouse is released, so the selection is never lost. */
  document.addEventListener("mousedown", (event) => {
    state.dragging = event.button === 0 && !!event.target.closest && !!event.target.closest(".passage-text");
  });
  document.addEventListener("mouseup", () => {
    const dragged = state.dragging;
    state.dragging = false;
    try { markSelection(dragged); } finally { if (state.renderHeld) renderCandidates(); }
  });

  function markSelection(dragged) {
    const selection = window.getSelection();
    if (!selection || selection.isCollapsed || !entry()) return;
    const range = selection.getRangeAt(0);
    const start = range.startContainer.parentElement && range.startContainer.parentElement.closest(".passage-text");
    const end = range.endContainer.parentElement && range.endContainer.parentElement.closest(".passage-text");
    if (!start || start !== end) {
      if (dragged) say("not marked: a selection must lie within one passage (select again inside it)");
      return;
    }
    const p = passageOf(start);
    const full = p.before + p.text + p.after;
    selection.removeAllRanges();
    if (start.textContent !== full) {  // the offsets below would address other characters: save nothing
      $("save-status").textContent = "this passage is not shown as the document reads; open the document (o) and select there";
      $("save-status").dataset.state = "error";
      return;
    }
    const chars = RagexpText.chars(full);  // the server counts code points, the DOM UTF-16 units
    let a = RagexpText.points(full, textOffset(start, range.startContainer, range.startOffset));
    let b = RagexpText.points(full, textOffset(start, range.endContainer, range.endOffset));
    while (a < b && /\s/u.test(chars[a])) a++;
    while (b > a && /\s/u.test(chars[b - 1])) b--;
    if (a >= b) return;
    const base = Number(start.dataset.base);
    if (entry().answerable === false) {
      say("not marked: this question is unanswerable; press u first if the corpus does answer it");
      return;
    }
    addSpan({doc_id: start.dataset.doc, start: base + a, end: base + b, quote: chars.slice(a, b).join(""), grade: 1});
    if (p === state.candidates[state.focus]) focusNextUnjudged();  // the focused passage is judged now: x/r go on
  }

  /* Whether the person judged passage p: a span over it (either grade) or positive evidence inside it;
     a disputed passage only by a span over exactly it (a narrower span inside decides that one only). */
  function judged(p) {
    const e = entry();
    const inside = (x) => !adjudicating() && x.doc_id === p.doc_id && x.start != null && (x.grade ?? 1) >= 1
      && x.start < p.end && x.end > p.start;
    return !!e && e.evidence.some((x) => sameSpan(x, p) || inside(x));
  }

  /* Focus the first candidate after the focused one that nobody judged yet (wrapping round). */
  function focusNextUnjudged() {
    const n = state.candidates.length;
    for (let i = 1; i <= n; i++) {
      const index = (state.focus + i) % n;
      if (!judged(state.candidates[index])) return focusCandidate(index);
    }
  }

  /* Judge the focused candidate with the key, then move on to the next unjudged one. */
  function judgeFocused(grade) {
    const p = state.candidates[state.focus];
    if (!p) return;
    judgePassage(p, grade);
    focusNextUnjudged();
  }

  /* Every candidate not judged yet becomes a judged negative, in one save. */
  function restNotRelevant() {
    const e = entry();
    const rest = state.candidates.filter((p) => !judged(p));
    if (!e || !rest.length) return;
    setEvidence([...e.evidence, ...rest.map((p) => ({doc_id: p.doc_id, start: p.start, end: p.end, quote: p.text, grade: 0}))]);
  }

  function judgePassage(p, grade) {
    if (!p) return;
    const e = entry();
    if (grade >= 1 && e.answerable === false) {
      say("not marked relevant: this question is unanswerable; press u first if the corpus does answer it");
      return;
    }
    const span = {doc_id: p.doc_id, start: p.start, end: p.end, quote: p.text, grade};
    const evidence = e.evidence.filter((x) => !sameSpan(x, span));
    const already = e.evidence.some((x) => sameSpan(x, span) && (x.grade ?? 1) === grade);
    if (!already) evidence.push(span);
    return setEvidence(evidence);
  }

  async function openDocument(p) {
    if (!p) return;
    const doc = await getJSON(`/api/documents/${encodeURIComponent(p.doc_id)}`);
    state.document = doc;
    $("document-title").textContent = `${doc.title || doc.doc_id} (${doc.doc_id})`;
    $("document-panel").hidden = false;
    renderCandidates();
    const mark = $("document").querySelector("mark");
    if (mark) mark.scrollIntoView({block: "center"});
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-act]");
    if (!button) return;
    const p = passageOf(button);
    const act = button.dataset.act;
    if (act === "relevant") judgePassage(p, 1);
    else if (act === "negative") judgePassage(p, 0);
    else if (act === "document") openDocument(p);
  });

  $("close-document").onclick = () => { state.document = null; $("document-panel").hidden = true; };

  $("search-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = $("search").value.trim();
    if (!q) return;
    $("search").blur();  // the item's keys work again at once (typed keys never land in the box)
    const data = await getJSON(`/api/search?q=${encodeURIComponent(q)}`);
    state.searchHits = data.hits;
    renderCandidates();
  });

  /* --- the item --- */

  function renderItem() {
    const e = entry();
    if (!e) return;
    $("entry-status").textContent = `· ${e.status}`;
    $("spans").replaceChildren(...e.evidence.map((x, i) => {
      const stale = e.stale && e.stale[String(i)];
      const page = e.pages && e.pages[i] ? ` ${e.pages[i]}` : "";
      const where = x.start != null ? `${x.doc_id}${page} [${x.start}, ${x.end})` : `${x.doc_id} (whole document)`;
      const grade = x.grade ?? 1;
      const select = el("select", {dataset: {span: String(i)}},
        [0, 1, 2, 3].map((g) => el("option", {selected: g === grade}, String(g))));
      return el("li", {className: grade === 0 ? "negative" : ""}, grade === 0 ? "not relevant: " : "",
        el("span", {className: "quote"}, (x.quote || "").slice(0, 220)),
        el("div", {className: "muted"}, `${where} · grade `, select, " ",
          el("button", {dataset: {remove: String(i)}, title: "Delete removes the last"}, "remove")),
        stale ? el("div", {className: "stale"}, `stale: ${stale}`) : null);
    }));
    if (!e.evidence.length) $("spans").append(el("li", {className: "muted"}, "none yet"));
    const hints = e.hints || [];
    $("hints").replaceChildren(...(hints.length ? ["Hints: ",
      ...hints.flatMap((h) => [el("span", {className: "tag hint", dataset: {hint: h}, title: "add tag"}, `${h}?`), " "]),
      el("span", {className: "muted"}, "(", el("kbd", {}, "t"), " adds them)")] : []));
    $("tags").replaceChildren(...CATEGORIES.map((c, i) => el("span",
      {className: (e.tags || []).includes(c) ? "tag on" : "tag", dataset: {tag: c}, title: `Alt+${i + 1}`},
      `${c} `, el("kbd", {}, `Alt+${i + 1}`))));
    $("unanswerable").checked = e.answerable === false;
    $("facts").disabled = e.answerable === false;  // no facts to an unanswerable question: its gold answer says why
    $("gold").placeholder = e.answerable === false ? "what a good reply says (\"The docs do not say ...\"), optional"
      : "a, type the answer, Enter";
    if (document.activeElement !== $("gold")) $("gold").value = e.gold_answer || "";
    if (document.activeElement !== $("facts")) $("facts").value = (e.key_facts || []).join("\n");
    renderAdjudication();
  }

  $("spans").addEventListener("change", (event) => {
    const index = event.target.dataset.span;
    if (index === undefined) return;
    const evidence = entry().evidence.map((x, i) => (String(i) === index ? {...x, grade: Number(event.target.value)} : x));
    setEvidence(evidence);
  });
  $("spans").addEventListener("click", (event) => {
    const index = event.target.dataset.remove;
    if (index === undefined) return;
    setEvidence(entry().evidence.filter((_, i) => String(i) !== index));
  });

  function toggleTag(tag) {
    const tags = new Set(entry().tags || []);
    if (tags.has(tag)) tags.delete(tag); else tags.add(tag);
    save({tags: [...tags], confirmed: true});
  }
  $("tags").addEventListener("click", (event) => { const t = event.target.closest("[data-tag]"); if (t) toggleTag(t.dataset.tag); });
  $("hints").addEventListener("click", (event) => { const t = event.target.closest("[data-hint]"); if (t) toggleTag(t.dataset.hint); });

  function acceptHints() {
    const e = entry();
    const tags = new Set([...(e.tags || []), ...(e.hints || [])]);
    save({tags: [...tags], confirmed: true});
  }

  /* Unanswerable and an answer never stand together: marking a question unanswerable clears its
     gold answer and key facts in the same save (and says so; its gold answer may then say why the
     corpus does not answer it, and key facts stay off); one with evidence marked relevant is
     refused, as the eval set could not hold it. */
  function setUnanswerable(value) {
    const e = entry();
    if (!e) return;
    if (value && e.evidence.some((x) => (x.grade ?? 1) >= 1)) {
      say("not unanswerable: evidence is marked relevant; judge it not relevant (x) or remove it (Delete) first");
      renderItem();
      return;
    }
    leaveFields();
    const changes = {answerable: !value, confirmed: true, skipped: false};
    const cleared = value && ((e.gold_answer || "") !== "" || (e.key_facts || []).length > 0);
    if (value) Object.assign(changes, {gold_answer: "", key_facts: []});
    say(cleared ? "unanswerable: its gold answer and key facts were cleared" : "");
    save(changes);
  }
  $("unanswerable").addEventListener("change", (event) => setUnanswerable(event.target.checked));

  /* a / f: into the answer fields, the caret at the end of what they hold. */
  function write(id) {
    const e = entry();
    if (!e) return;
    if (id === "facts" && e.answerable === false) { say("this question is unanswerable: no key facts (u to change it)"); return; }
    const field = $(id);
    field.focus();
    field.setSelectionRange(field.value.length, field.value.length);
  }

  /* While the focus is in a text field, the page says so and how to leave it (keys.js). */
  const FIELD_NAMES = {gold: "the gold answer", facts: "the key facts", search: "the corpus search", "new-query": "a new question"};
  document.addEventListener("focusin", (event) => {
    const name = FIELD_NAMES[event.target.id];
    $("typing").hidden = !name;
    if (name) $("typing").textContent = `Typing into ${name}: keys are typed here; ${RagexpKeys.leaving(event.target)} leaves.`;
  });
  document.addEventListener("focusout", () => { $("typing").hidden = true; });

  const timers = {};
  function textField(id, toChanges) {
    const el = $(id);
    const flush = () => { clearTimeout(timers[id]); timers[id] = null; save(toChanges(el.value)); };
    el.addEventListener("input", () => { clearTimeout(timers[id]); timers[id] = setTimeout(flush, 400); });
    el.addEventListener("blur", () => { if (timers[id]) flush(); });
  }
  textField("gold", (value) => ({gold_answer: value.trim()}));
  textField("facts", (value) => ({key_facts: value.split("\n").map((s) => s.trim()).filter(Boolean)}));

  function flushFields() { for (const id of ["gold", "facts"]) if (timers[id]) $(id).dispatchEvent(new Event("blur")); }
  // a reload or a closed tab within the typing pause: the answer is queued (localStorage) and sent on reopening
  window.addEventListener("pagehide", flushFields);

  function next(step = 1, openOnly = true) {
    const index = state.entries.findIndex((e) => e.id === state.current);
    for (let i = 1; i <= state.entries.length; i++) {
      const candidate = state.entries[(index + step * i + state.entries.length * 2) % state.entries.length];
      if (!openOnly || candidate.status === "open" || candidate.status === "review") return open(candidate.id);
    }
  }

  /* Leave a text field of the item: the next key is a shortcut again (also when no question is left to open). */
  function leaveFields() {
    flushFields();
    const active = document.activeElement;
    if (active && ["gold", "facts"].includes(active.id)) active.blur();
  }

  function done() {
    leaveFields();
    const e = entry();
    // an adjudicated question is settled on the server's reading of its saved entry: wait for it
    if (adjudicating(e) && unanswered.some((sent) => sent.id === e.id)) { lastSave.then(done, done); return; }
    const unsettled = adjudicationUnsettled(e);
    if (unsettled) { say(unsettled); return; }
    const changes = {confirmed: true, skipped: false};
    if (e.review && !e.reviewed) changes.reviewed = true;
    save(changes);
    next();
  }
  function skip() { leaveFields(); save({skipped: true}); next(); }
  $("done").onclick = done;
  $("skip").onclick = skip;

  /* --- queue, coverage --- */

  function renderQueue() {
    $("queue").replaceChildren(...state.entries.map((e) => el("li", {dataset: {id: e.id}, className: e.id === state.current ? "current" : ""},
      el("span", {className: `badge ${e.status}`, title: e.pending ? `${e.pending} queued passages not judged yet` : ""},
        e.pending ? `${e.status} ${e.pending}` : e.status),
      staleSpans(e) ? el("span", {className: "badge stale", title: "spans that no longer read their quote: re-mark them"},
        `stale ${staleSpans(e)}`) : null,
      el("span", {}, e.query))));
    const done = state.entries.filter((e) => e.status === "done").length;
    const review = state.entries.filter((e) => e.status === "review").length;
    const stale = state.entries.filter((e) => staleSpans(e)).length;
    $("queue-count").textContent = `${done} done of ${state.entries.length}` + (review ? ` · ${review} to review` : "") +
      (stale ? ` · ${stale} stale` : "");
  }
  $("queue").addEventListener("click", (event) => { const li = event.target.closest("li[data-id]"); if (li) open(li.dataset.id); });

  $("new-question").addEventListener("submit", async (event) => {
    event.preventDefault();
    const query = $("new-query").value.trim();
    $("new-query").blur();  // the next key is a shortcut again, never the start of another question
    if (!query) return;
    $("new-query").value = "";
    const reply = await saver.send("POST", "/api/entries", {query});
    if (reply && reply.entry) { applyReply(reply); open(reply.entry.id); }
  });

  /* Delete the current question from the queue (only one the eval set does not hold). */
  async function deleteQuestion() {
    const e = entry();
    if (!e || e.status === "done") {
      $("save-status").textContent = "a question in the eval set is not deleted: remove its evidence, or skip it (s)";
      $("save-status").dataset.state = "error";
      return;
    }
    const reply = await saver.send("DELETE", `/api/entries/${encodeURIComponent(e.id)}`);
    if (!reply) return;
    state.entries = state.entries.filter((x) => x.id !== e.id);
    renderQueue();
    const following = state.entries.find((x) => x.status === "open" || x.status === "review") || state.entries[0];
    if (following) open(following.id);  // the first question still to do
  }

  function renderCoverage() {
    const c = state.coverage;
    if (!c) return;
    const p = c.progress;
    $("progress").textContent = `${p.items} items (advised ${p.advised_min}–${p.advised_max})`;
    const rows = c.categories.map((x) => el("tr", {className: x.ok ? "" : "low"},
      el("td", {}, x.name), el("td", {}, String(x.items)), el("td", {className: "muted"}, `want ≥ ${x.wanted}`)));
    const docs = c.documents, sections = c.sections;
    $("coverage").replaceChildren(
      el("div", {className: "small"}, `${p.items} of ${p.advised_min}–${p.advised_max} items `,
        el("progress", {max: p.advised_min, value: Math.min(p.items, p.advised_min)})),
      el("table", {}, rows),
      el("div", {className: "small"}, `Documents without a question: ${docs.without_question} of ${docs.total}`),
      el("div", {className: "small muted"}, docs.first.slice(0, 8).join(", ")),
      el("div", {className: "small"}, `Sections without a question: ${sections.without_question} of ${sections.total}`),
      el("div", {className: "small muted"}, sections.first.slice(0, 6).map((s) => `${s.doc_id}: ${s.title || "(top)"}`).join("; ")));
  }

  /* --- keys --- */

  const focusedPassage = () => state.candidates[state.focus];
  /* A passage key acts only once the open question's own passages are shown: in the moment the next
     question's are on their way, the previous question's must not be judged against it. */
  const shown = (run) => () => { if (state.candidatesOf === state.current) run(); };
  RagexpKeys.bind([
    {key: "j", help: "next candidate passage", run: shown(() => focusCandidate(Math.min(state.focus + 1, state.candidates.length - 1)))},
    {key: "k", help: "previous candidate passage", run: shown(() => focusCandidate(Math.max(state.focus - 1, 0)))},
    {key: "r", help: "the focused passage is relevant (grade 1), then the next unjudged one", run: shown(() => judgeFocused(1))},
    {key: "x", help: "the focused passage is not relevant (judged negative), then the next unjudged one", run: shown(() => judgeFocused(0))},
    {key: "Shift+x", help: "every passage shown and not judged yet is not relevant", run: shown(restNotRelevant)},
    {key: "o", help: "open the focused passage's whole document", run: shown(() => openDocument(focusedPassage()))},
    {key: "1", help: "grade 1 for the last evidence", run: () => gradeLast(1)},
    {key: "2", help: "grade 2 for the last evidence", run: () => gradeLast(2)},
    {key: "3", help: "grade 3 for the last evidence", run: () => gradeLast(3)},
    {key: "Delete", help: "remove the last evidence", run: () => setEvidence(entry().evidence.slice(0, -1))},
    {key: "/", help: "search the corpus", run: () => $("search").focus()},
    {key: "a", help: "write the gold answer (Enter or Esc leaves the field)", run: () => write("gold")},
    {key: "f", help: "write key facts, one a line (Enter: next fact; Esc leaves the field)", run: () => write("facts")},
    {key: "t", help: "add the hinted categories as tags", run: acceptHints},
    ...CATEGORIES.map((c, i) => ({key: `Alt+${i + 1}`, help: `toggle tag ${c}`, run: () => toggleTag(c)})),
    {key: "u", help: "unanswerable on/off", run: () => setUnanswerable(entry().answerable !== false)},
    {key: "s", help: "skip this question", run: skip},
    {key: "Ctrl+Enter", help: "done (accept), next open question", run: done},
    {key: "n", help: "next open question", run: () => next(1)},
    {key: "p", help: "previous question", run: () => next(-1, false)},
    {key: "q", help: "add a question by hand", run: () => $("new-query").focus()},
    {key: "Shift+d", help: "delete this question from the queue (not one in the eval set)", run: deleteQuestion},
  ]);
  $("help").onclick = () => RagexpKeys.toggleHelp();

  function gradeLast(grade) {
    const evidence = entry().evidence.slice();
    for (let i = evidence.length - 1; i >= 0; i--) {
      if ((evidence[i].grade ?? 1) >= 1) { evidence[i] = {...evidence[i], grade}; return setEvidence(evidence); }
    }
  }

  window.ragexpAnnotate = {state};
  load().catch((err) => { $("save-status").textContent = "could not load: " + err.message; $("save-status").dataset.state = "error"; });
})();
