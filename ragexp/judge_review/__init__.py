"""``ragexp judge review``: a person checks a sample of a run's judged claims in the browser.

:mod:`~.sample` draws the claims (seeded) with their context and the span the judge relied on,
:mod:`~.session` writes the person's verdicts to the labels CSV and logs the agreement with the
judge to the run, :mod:`~.router` is the page's HTTP API (page: ``ragexp/web/static/review.*``).
"""
