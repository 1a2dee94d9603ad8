/* ragexp judge review: label sampled claims, keyboard first; every verdict is saved at once. */
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const NAMES = {supported: "supported", not_supported: "not supported", skip: "skipped"};
  let state = null;
  let current = 0;
  let saver = null;
  const unanswered = [];  // verdicts sent whose reply has not come yet: {id, label}, in order

  const decided = (c) => Boolean(c.human_label) || c.note === "skipped";
  const choice = (c) => c.human_label || (c.note === "skipped" ? "skip" : "");
  function setChoice(c, label) {
    c.human_label = label === "skip" ? "" : label;
    c.note = label === "skip" ? "skipped" : "";
  }

  function fmt(value, digits = 3) {
    return value === null || value === undefined ? "undefined" : Number(value).toFixed(digits);
  }

  /* The UTF-16 offset of the server's code-point offset `points` in text (text.js). */
  function utf16(text, points) { return RagexpText.chars(text).slice(0, points).join("").length; }

  /* Put `text` into `el` with [start, end) wrapped in <mark> (text nodes only: nothing is parsed as HTML). */
  function marked(el, text, start, end) {
    el.textContent = "";
    if (start === null || start === undefined || start < 0 || end <= start) { el.textContent = text; return null; }
    const mark = document.createElement("mark");
    mark.textContent = text.slice(start, end);
    el.append(document.createTextNode(text.slice(0, start)), mark, document.createTextNode(text.slice(end)));
    return mark;
  }

  function show(index) {
    current = Math.max(0, Math.min(index, state.claims.length - 1));
    const c = state.claims[current];
    $("claim-pos").textContent = `${current + 1} of ${state.claims.length}`;
    $("query").textContent = c.query || "(no question stored)";
    const at = c.answer.indexOf(c.claim);
    marked($("answer"), c.answer, at, at + c.claim.length);
    $("claim").textContent = c.claim;
    const [start, end] = (c.evidence || [null, null]).map((x) => x === null ? null : utf16(c.context, x));
    const mark = marked($("context"), c.context, start, end);
    $("evidence-by").textContent = !c.evidence ? "the judge names no part of it"
      : c.evidence_by === "judge" ? "highlighted: the sentence the judge's verdict rests on"
      : "highlighted: the sentence sharing most words with the claim (the judge names no span)";
    if (mark) { $("context").scrollTop = Math.max(0, mark.offsetTop - $("context").offsetTop - 40); }
    for (const label of ["supported", "not_supported", "skip"]) {
      $("btn-" + label).classList.toggle("chosen", choice(c) === label);
    }
    const verdict = $("judge-verdict");
    verdict.className = "";
    if (!decided(c)) {
      verdict.textContent = "The judge's verdict is shown once you decide (so it cannot sway you).";
      verdict.classList.add("muted");
    } else {
      const score = c.judge_score ? ` · score ${c.judge_score}` : "";
      const raw = c.judge_raw ? ` · ${c.judge_raw}` : "";
      verdict.textContent = `Judge: ${NAMES[c.judge_label]}${score}${raw}`;
      if (c.human_label) verdict.classList.add(c.human_label === c.judge_label ? "agree" : "disagree");
    }
    renderList();
  }

  function renderList() {
    const list = $("claim-list");
    list.textContent = "";
    state.claims.forEach((c, i) => {
      const li = document.createElement("li");
      li.dataset.id = c.id;
      li.dataset.state = choice(c) || "open";
      li.className = i === current ? "current" : "";
      const mark = document.createElement("span");
      mark.className = "state";
      mark.textContent = {supported: "✓", not_supported: "✗", skip: "–"}[choice(c)] || "·";
      li.append(mark, document.createTextNode(c.claim));
      li.title = c.id;
      li.onclick = () => show(i);
      list.append(li);
    });
    const done = state.claims.filter(decided).length;
    $("progress").textContent = `${done} / ${state.claims.length} decided`;
  }

  function renderAgreement(summary) {
    const a = summary.agreement;
    const ci = a.kappa === null ? "" : a.kappa_ci_low === null ? " (one side used a single label: 0 by construction)"
      : ` [${fmt(a.kappa_ci_low, 2)}, ${fmt(a.kappa_ci_high, 2)}] 95% CI`;
    const rows = [["labelled", a.n], ["skipped", a.skipped], ["accuracy", fmt(a.accuracy)],
      ["Cohen's kappa (weighted to the run's verdicts)", fmt(a.kappa) + ci]];
    const table = $("agreement");
    table.textContent = "";
    for (const [name, value] of rows) {
      const tr = table.insertRow();
      tr.insertCell().textContent = name;
      tr.insertCell().textContent = String(value);
    }
    $("logged").classList.toggle("error", Boolean(summary.log_error));
    $("logged").textContent = summary.log_error ? `Not logged to the run: ${summary.log_error} (the next verdict retries).`
      : summary.logged
      ? `Logged to run ${state.run.name} (judge_review/*) at ${summary.logged.at}.`
      : `Logged to the run in MLflow once all ${state.claims.length} claims are decided.`;
  }

  /* The PPI estimate of the run's faithfulness from the labels so far, and the labels a chosen width needs. */
  let lastPPI = null;
  function renderPPI(summary) {
    lastPPI = summary.ppi || lastPPI;
    const table = $("ppi");
    table.textContent = "";
    const metrics = Object.entries(lastPPI || {});
    $("ppi-panel").hidden = metrics.length === 0;
    const names = {faithfulness: "faithfulness (query mean)", claim_faithfulness: "supported claims (share)"};
    for (const [metric, e] of metrics) {
      const tr = table.insertRow();
      tr.insertCell().textContent = names[metric] || metric;
      tr.insertCell().textContent = `${fmt(e.estimate)} [${fmt(e.low)}, ${fmt(e.high)}] · judge alone ${fmt(e.judge)}`;
    }
    const width = $("ppi-width").value;
    $("ppi-needed").textContent = metrics.map(([metric, e]) => {
      return `${names[metric] || metric}: ${e.labels_needed[String(Number(width))]} more`;
    }).join("; ");
  }

  /* A reply carries the file's verdicts: claims another page decided show that verdict, except
     the ones whose own verdict is still on its way (this page's newest). */
  function applyReply(reply) {
    renderAgreement(reply);
    renderPPI(reply);
    if (!reply.verdicts) return;
    const waiting = new Set(unanswered.map((sent) => sent.id));
    let changed = false;
    for (const c of state.claims) {
      const stored = reply.verdicts[c.id];
      if (stored === undefined || waiting.has(c.id) || stored === choice(c)) continue;
      setChoice(c, stored);
      changed = true;
    }
    if (changed) show(current);
  }

  /* Send the verdict and the one the page showed ("before"): the server writes it only when the
     file still holds "before", answers "already so" when it holds the verdict (a retry after a
     lost reply), and 409 otherwise (another page gave this claim another verdict). */
  function decide(label) {
    const c = state.claims[current];
    const before = choice(c);
    setChoice(c, label);
    const sent = {id: c.id, label};
    unanswered.push(sent);
    const answered = () => unanswered.splice(unanswered.indexOf(sent), 1);
    saver.send("PUT", "/api/review/label", {id: c.id, label, before}).then(
      (reply) => { answered(); if (reply) applyReply(reply); },
      () => { answered(); });
    const said = label === "skip" ? "skipped it" : `said ${NAMES[label]}`;
    const agree = label === "skip" ? "" : label === c.judge_label ? " (agree)" : " (disagree)";
    $("last").textContent = `Claim ${current + 1}: you ${said}; the judge said ${NAMES[c.judge_label]}${agree}.`;
    const next = state.claims.findIndex((x, i) => i > current && !decided(x));
    const open = next >= 0 ? next : state.claims.findIndex((x) => !decided(x));
    show(open >= 0 ? open : current);
  }

  async function load() {
    const reply = await fetch("/api/review");
    state = await reply.json();
    $("run").textContent = `run ${state.run.name} · ${state.claims.length} of ${state.run.judged_claims} judged claims (seed ${state.run.seed})`;
    $("labels-file").textContent = `Verdicts go to ${state.labels_file}`;
    saver = new RagexpSaver({status: $("save-status"), storageKey: "judge-review:" + state.run.id});
    renderAgreement(state);
    renderPPI(state);
    $("ppi-width").onchange = () => renderPPI({});
    const open = state.claims.findIndex((c) => !decided(c));
    show(open >= 0 ? open : 0);
    saver.replayPending().then((replies) => {
      const last = replies.filter(Boolean).pop();
      if (last) applyReply(last);
    });
    document.body.dataset.ready = "true";
  }

  for (const label of ["supported", "not_supported", "skip"]) {
    $("btn-" + label).onclick = () => decide(label);
  }
  RagexpKeys.bind([
    {key: "y", help: "supported, then the next undecided claim", run: () => decide("supported")},
    {key: "n", help: "not supported, then the next undecided claim", run: () => decide("not_supported")},
    {key: "s", help: "skip (no verdict), then the next undecided claim", run: () => decide("skip")},
    {key: "j", help: "next claim", run: () => show(current + 1)},
    {key: "k", help: "previous claim", run: () => show(current - 1)},
    {key: "ArrowDown", help: "next claim", run: () => show(current + 1)},
    {key: "ArrowUp", help: "previous claim", run: () => show(current - 1)},
  ]);
  load();
})();
