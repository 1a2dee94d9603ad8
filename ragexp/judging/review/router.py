"""The review page's HTTP API (mounted by ``ragexp judge review`` on 127.0.0.1).

- ``GET /api/review``: :meth:`ReviewSession.state` (the run, the sampled claims, the labels file's etag, the agreement);
- ``PUT /api/review/label`` with ``{"id": ..., "label": "supported" | "not_supported" | "skip"}``
  and ``If-Match: <etag>``: records the verdict; 409 when the labels file changed elsewhere, 404
  for a claim not in the sample, 422 for another label.
"""

from __future__ import annotations

from fastapi import APIRouter, Body, Header, HTTPException

from ragexp.judging.review.session import ReviewSession
from ragexp.web.files import Conflict


def review_router(session: ReviewSession) -> APIRouter:
    router = APIRouter()

    @router.get("/api/review")
    def state() -> dict:
        return session.state()

    @router.put("/api/review/label")
    def label(body: dict = Body(...), if_match: str | None = Header(default=None)) -> dict:  # noqa: B008 - FastAPI's idiom
        try:
            return session.label(str(body.get("id", "")), str(body.get("label", "")), if_match)
        except Conflict as conflict:
            raise conflict.http() from None
        except KeyError:
            raise HTTPException(status_code=404, detail={"message": f"no sampled claim {body.get('id')!r}"}) from None
        except ValueError as err:
            raise HTTPException(status_code=422, detail={"message": str(err)}) from None

    return router
