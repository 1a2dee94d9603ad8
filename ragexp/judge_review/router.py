"""The review page's HTTP API (mounted by ``ragexp judge review`` on 127.0.0.1).

- ``GET /api/review``: :meth:`ReviewSession.state` (the run, the sampled claims with the labels
  file's verdicts, the agreement);
- ``PUT /api/review/label`` with ``{"id": ..., "label": "supported" | "not_supported" | "skip",
  "before": <the verdict the page showed, "" for none>}``: records the verdict, or answers
  ``already_so`` when the file holds it already (a retry); 409 when the file gives the claim
  another verdict than ``before`` (:mod:`ragexp.judge_review.session`), 404 for a claim not in
  the sample, 422 for another label or a missing ``before``.
"""

from __future__ import annotations

from fastapi import APIRouter, Body, HTTPException

from ragexp.judge_review.session import ReviewSession
from ragexp.web.edit_session import Conflict


def review_router(session: ReviewSession) -> APIRouter:
    router = APIRouter()

    @router.get("/api/review")
    def state() -> dict:
        return session.state()

    @router.put("/api/review/label")
    def label(body: dict = Body(...)) -> dict:  # noqa: B008 - FastAPI's idiom
        if not isinstance(body.get("before"), str):
            raise HTTPException(status_code=422, detail={"message": "before: the verdict the page showed is needed "
                                                                   '("" for none)'})
        try:
            return session.label(str(body.get("id", "")), str(body.get("label", "")), body["before"])
        except Conflict as conflict:
            raise conflict.http() from None
        except KeyError:
            raise HTTPException(status_code=404, detail={"message": f"no sampled claim {body.get('id')!r}"}) from None
        except ValueError as err:
            raise HTTPException(status_code=422, detail={"message": str(err)}) from None

    return router
