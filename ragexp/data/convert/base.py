"""What a converter returns, how it refuses a file, and how it is identified.

A converter turns a file's bytes into Markdown-structured text (headings as ``#`` lines, tables
as Markdown tables where the format has them). That text *is* the document from then on:
evidence offsets index it, quotes resolve against it, chunkers see its headings.

A corpus file (text, or one to convert) is read only when it is a regular file of at most
:data:`MAX_DOCUMENT_BYTES` (a 1.5 GB sparse ``.md`` is refused in one line, not read).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

#: One corpus document file at most (a book-length Markdown file is a few MiB).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Converted:
    """``title``: what the file names itself ("" when nothing); ``page_starts``: offset in
    ``text`` where each page begins (PDF only, else empty); ``notes``: what a reader of the run
    should know about this file (a guessed encoding, pages without text)."""

    text: str
    title: str = ""
    page_starts: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


class Unconvertible(Exception):
    """The file holds no text ragexp can read; ``str(err)`` is the reason, one line."""


@dataclass(frozen=True)
class ConvertOptions:
    """``html_remove_boilerplate``: drop navigation, site header/footer and sidebars from HTML."""

    html_remove_boilerplate: bool = True


@dataclass(frozen=True)
class Converter:
    """``revision`` counts changes to ragexp's own part of the conversion; with the versions of
    ``libraries`` (distribution names) it is the converter's :meth:`identity`, part of the corpus
    fingerprint and of the conversion cache key; ``options``: the :class:`ConvertOptions` fields
    that change its output (also in the cache key)."""

    name: str
    suffixes: tuple[str, ...]
    revision: int
    libraries: tuple[str, ...]
    convert: Callable[[bytes, ConvertOptions], Converted]
    options: tuple[str, ...] = ()

    def options_of(self, options: ConvertOptions) -> dict:
        """The values of the options this converter reads."""
        return {name: getattr(options, name) for name in self.options}

    def identity(self) -> str:
        """``"pdf/1 pypdfium2 5.15.2"``: changes whenever the text it produces may change."""
        return " ".join([f"{self.name}/{self.revision}", *(f"{lib} {_version(lib)}" for lib in self.libraries)])


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "missing"
