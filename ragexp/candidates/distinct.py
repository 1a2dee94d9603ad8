"""Exact deduplication of logged queries, with counts, in memory that grows with the number of
DISTINCT queries only.

Each query is tidied for display (:func:`tidy`: Unicode NFKC, invisible format characters removed,
whitespace collapsed) and keyed by :func:`ragexp.data.lint.normalise_query` (case-folded, runs of
punctuation and spaces collapsed): the rule ``ragexp evalset lint`` uses to call two queries
duplicates. A query with personal data or a secret (:mod:`ragexp.candidates.personal_data`) is
counted by kind and never stored.

Per distinct key the table keeps Python's 64-bit ``hash`` of the key (not the key itself), the
count, the file and line of the first occurrence and the first display form; once a second display
form of the key appears, forms are counted too (at most :data:`MAX_FORMS` per key; later new forms
add to the key's count only). A display form already stored was screened when first seen, so only
new forms are screened again.

The table holds at most :data:`MAX_DISTINCT` distinct queries (about 0.3 GB): the query after that
is refused in one line naming its file and line, before memory grows further (sample the log
first, e.g. ``shuf -n 1000000``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from ragexp.candidates.personal_data import sensitive_kind
from ragexp.data.lint import normalise_query
from ragexp.errors import RagexpInputError

MAX_FORMS = 5
#: Distinct queries one import may hold in memory (~250 bytes each plus the text).
MAX_DISTINCT = 1_000_000
_INVISIBLE = re.compile(r"[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACE = re.compile(r"\s+")


def tidy(query: str) -> str:
    """Display form: NFKC, zero-width and other invisible format characters removed, whitespace collapsed."""
    return _SPACE.sub(" ", _INVISIBLE.sub("", unicodedata.normalize("NFKC", query))).strip()


@dataclass(slots=True)
class DistinctQuery:
    """One distinct query: its first display form, how often it was logged, where it was first seen."""

    text: str
    count: int
    source: int  # index into DistinctQueries.sources
    line: int
    forms: Counter | None = None  # display form -> count, once the key has a second form

    def form_counts(self) -> Counter:
        return self.forms if self.forms is not None else Counter({self.text: self.count})

    def most_common_form(self) -> str:
        return self.forms.most_common(1)[0][0] if self.forms else self.text


@dataclass
class DistinctQueries:
    """Distinct queries in first-seen order, and what was counted on the way."""

    sources: list[str] = field(default_factory=list)
    entries: list[DistinctQuery] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)  # hash(key) -> position in entries
    queries: int = 0  # queries offered (non-blank lines)
    left_out: Counter = field(default_factory=Counter)  # kind -> queries left out
    no_words: int = 0  # queries without a letter or digit (punctuation, emoji)

    def add_source(self, name: str) -> int:
        self.sources.append(name)
        return len(self.sources) - 1

    def add(self, query: str, source: int, line: int) -> None:
        """Count one logged query (see the module docstring)."""
        self.queries += 1
        text = tidy(query)
        key = normalise_query(text)
        if not key:
            self.no_words += 1
            return
        position = self.index.get(hash(key))
        entry = None if position is None else self.entries[position]
        if entry is not None and (text == entry.text or (entry.forms is not None and text in entry.forms)):
            entry.count += 1
            if entry.forms is not None:
                entry.forms[text] += 1
            return
        kind = sensitive_kind(text)
        if kind is not None:
            self.left_out[kind] += 1
            return
        if entry is None:
            if len(self.entries) >= MAX_DISTINCT:
                raise RagexpInputError(f"more than {MAX_DISTINCT:,} distinct queries, the most one import holds in "
                                       "memory; sample the logs first (e.g. shuf -n 1000000 LOG > sample.log)",
                                       file=self.sources[source], line=line)
            self.index[hash(key)] = len(self.entries)
            self.entries.append(DistinctQuery(text, 1, source, line))
            return
        if entry.forms is None:
            entry.forms = Counter({entry.text: entry.count})
        entry.count += 1
        if len(entry.forms) < MAX_FORMS:
            entry.forms[text] += 1

    @property
    def duplicates(self) -> int:
        """Queries merged into an earlier one with the same key."""
        return sum(entry.count for entry in self.entries) - len(self.entries)
