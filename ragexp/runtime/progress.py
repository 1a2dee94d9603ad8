"""Whether progress bars are drawn: ``progress=false`` turns off every bar of a run.

tqdm reads ``TQDM_DISABLE`` only when it is first imported, long before a run's config is known,
so the pipelines ask here instead: :func:`bar` wraps tqdm, :func:`enabled` is what they pass to
libraries that draw their own bars (sentence-transformers' ``show_progress_bar``), and
:func:`set_enabled` also switches the bars of Hugging Face downloads and model loading.

One line per stage: :func:`bar` draws nothing for an iterable of one step or none (a search of
one query batch drew a bar per call: 966 of them in the demo's latency probe), and
:func:`suppressed` turns every bar off for a block that calls the pipeline over and over (the
latency probe's passes, which draw their own one bar).

A bar over batches of model calls moves per item: work inside :func:`ticking` reports each item it
finishes through :func:`tick` (a local model, each answer as its row of the decoded batch ends), so
the answers' bar advances per question instead of jumping once a batch of 32 is done.

``transformers`` is switched only once something imported it: the code that imports it to load a
model calls :func:`apply_to_libraries` right after, so a job whose stages are all cached never
imports it just to switch its bars.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")
_enabled = True
_advance: Callable[[int], None] | None = None  # where tick() reports, inside ticking()


def set_enabled(flag: bool) -> None:
    global _enabled
    _enabled = bool(flag)
    apply_to_libraries()


def apply_to_libraries() -> None:
    """Switch the Hugging Face hub's bars, and transformers' when it is imported, to :func:`enabled`."""
    try:
        from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

        (enable_progress_bars if _enabled else disable_progress_bars)()
    except ImportError:
        pass
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        (hf_logging.enable_progress_bar if _enabled else hf_logging.disable_progress_bar)()


def enabled() -> bool:
    return _enabled


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """No bar of ragexp or the libraries it switches while the block runs; the setting before it
    is restored afterwards."""
    before = _enabled
    set_enabled(False)
    try:
        yield
    finally:
        set_enabled(before)


@contextlib.contextmanager
def ticking(advance: Callable[[int], None]) -> Iterator[None]:
    """Items finished inside the block are reported to ``advance`` (a bar's ``update``) by
    :func:`tick`; the reporter before the block is restored afterwards."""
    global _advance
    before, _advance = _advance, advance
    try:
        yield
    finally:
        _advance = before


def tick(items: int = 1) -> None:
    """``items`` more finished: counted by the innermost :func:`ticking` block, if any."""
    if _advance is not None:
        _advance(items)


def bar(iterable: Iterable[T], *, disable: bool | None = False, **options: Any) -> Iterable[T]:
    """``tqdm(iterable, disable=disable, **options)`` while bars are enabled and ``iterable`` has
    more than one step (a sized one; an unsized one always gets its bar), else no bar
    (``disable=None`` is tqdm's "only on a terminal")."""
    single_step = hasattr(iterable, "__len__") and len(iterable) <= 1  # type: ignore[arg-type]
    return tqdm(iterable, disable=True if not _enabled or single_step else disable, **options)
