"""Every eval query's response from a system: cached, concurrent, resumable, never partial.

Each distinct request is sent once. A response is cached in the stage cache (stage
``system_response``) under ``(system identity, request)`` as soon as it arrives and parses, so a
sweep over judge or ``eval.*`` options asks the system nothing again, and an interrupted run
(Ctrl-C, SIGTERM, a crash) resumes without re-asking what it has. ``system.cache=false`` asks
again (and stores the new answers). A recorded system is read, not cached.

A query the system does not answer usably (after the HTTP retries) fails the run after all the
others were tried, with one line naming each failure kind, its count and its first example
(:func:`failure_line`): no run is logged with missing queries. Two bounds stop asking early, the
answers so far cached (the same command resumes): ``max_failed_queries`` failed queries (the line
lists every one of them), and ``deadline_s`` seconds of asking (queries in flight are abandoned;
an HTTP attempt ends within its own ``query_timeout_s``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ragexp.datamodel import EvalItem
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress
from ragexp.runtime.fingerprint import stable_hash
from ragexp.runtime.stage_cache import StageCache
from ragexp.systems.response import FAILURE_KINDS, SystemAnswer, SystemCallError, read_answer

CACHE_STAGE = "system_response"


@dataclass(frozen=True)
class Fetched:
    """One eval query's exchange: the request sent, the raw response (JSON), its typed reading,
    the endpoint latency of the answered attempt (ms; ``None`` when unknown) and whether it came
    from the cache."""

    query_id: str
    query: str
    request: dict
    response: Any
    answer: SystemAnswer
    latency_ms: float | None
    cached: bool

    def to_record(self) -> dict:
        """The line stored with the run (``system/responses.jsonl``), readable by ``system=recorded``."""
        return {"query_id": self.query_id, "query": self.query, "request": self.request, "latency_ms": self.latency_ms,
                "response": self.response}


def fetch_all(system: Any, items: Sequence[EvalItem], cache: StageCache, *, use_cache: bool = True,
              deadline_s: float | None = None, max_failed_queries: int | None = None) -> list[Fetched]:
    """The responses for ``items``, in their order (module docstring)."""
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    cacheable = use_cache and system.kind != "recorded"
    identity = system.identity()
    requests = [system.request(item) for item in items]
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, request in enumerate(requests):
        by_key[stable_hash(request)].append(i)
    replies: dict[str, tuple[Any, SystemAnswer, float | None, bool]] = {}
    todo = []
    for key, positions in by_key.items():
        stored = cache.get_json(CACHE_STAGE, {"system": identity, "request": requests[positions[0]]}) if cacheable else None
        if stored is not None:
            replies[key] = (stored["response"], read_answer(stored["response"], system.fields), stored["latency_ms"], True)
        else:
            todo.append(key)
    failures: dict[str, list[tuple[str, str]]] = defaultdict(list)

    def one(key: str) -> tuple[Any, SystemAnswer, float | None]:
        payload, latency_ms, _ = system.call(requests[by_key[key][0]])
        return payload, read_answer(payload, system.fields), latency_ms

    from tqdm import tqdm

    workers = max(1, int(system.concurrency))
    with tqdm(total=len(todo), desc=f"system={system.kind}", unit="q", disable=not progress.enabled() or not todo) as bar, \
            ThreadPoolExecutor(max_workers=workers) as pool:
        pending: dict[Future, str] = {}
        queue = list(todo)
        stopped = ""
        try:
            while (queue or pending) and not stopped:
                while queue and len(pending) < workers * 2:
                    key = queue.pop(0)
                    pending[pool.submit(one, key)] = key
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                done, _ = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
                if not done:
                    stopped = (f"system.deadline_s={deadline_s:g} passed with {len(queue) + len(pending)} of "
                               f"{len(by_key)} queries unanswered")
                for future in done:
                    key = pending.pop(future)
                    first = items[by_key[key][0]].id
                    try:
                        payload, answer, latency_ms = future.result()
                    except SystemCallError as err:
                        failures[err.kind].append((first, err.message))
                    else:
                        replies[key] = (payload, answer, latency_ms, False)
                        if cacheable:
                            cache.put_json(CACHE_STAGE, {"system": identity, "request": requests[by_key[key][0]]},
                                           {"response": payload, "latency_ms": latency_ms, "at": time.time()})
                    bar.update(1)
                failed = sum(len(v) for v in failures.values())
                if max_failed_queries is not None and failed >= max_failed_queries and (queue or pending):
                    stopped = (f"stopped after {failed} failed queries (system.max_failed_queries={max_failed_queries}), "
                               f"{len(queue) + len(pending)} left unanswered; failed: "
                               + ", ".join(q for kind in FAILURE_KINDS for q, _ in failures.get(kind, [])))
            if stopped:
                pool.shutdown(wait=False, cancel_futures=True)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            system.close()
    if stopped:
        answered = sum(1 for key in todo if key in replies) + len(by_key) - len(todo)
        detail = f"; {failure_line(failures, len(by_key), False)}" if failures else ""
        kept = f"; the {answered} answered are cached, run the same command again to resume" if cacheable and answered else ""
        raise RagexpInputError(f"the system was not asked to the end, no run logged: {stopped}{detail}{kept}", field="system")
    if failures:
        raise RagexpInputError(failure_line(failures, len(by_key), cacheable), field="system")
    out = []
    for item, request in zip(items, requests):
        payload, answer, latency_ms, cached = replies[stable_hash(request)]
        out.append(Fetched(item.id, item.query, request, payload, answer, latency_ms, cached))
    return out


def failure_line(failures: dict[str, list[tuple[str, str]]], n_requests: int, cached: bool) -> str:
    """``the system failed on 3 of 148 queries: http_5xx x2 (first: q3: ...); timeout x1 (...)``,
    and that the rest is cached (a re-run resumes) when it is."""
    failed = sum(len(v) for v in failures.values())
    parts = [f"{kind} x{len(failures[kind])} (first: {failures[kind][0][0]}: {failures[kind][0][1]})"
             for kind in FAILURE_KINDS if kind in failures]
    kept = (f"; the {n_requests - failed} answered are cached, run the same command again to resume"
            if cached and failed < n_requests else "")
    return f"the system failed on {failed} of {n_requests} queries, no run logged: {'; '.join(parts)}{kept}"
