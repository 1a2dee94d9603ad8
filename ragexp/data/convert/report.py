"""What reading a corpus folder converted, skipped and noticed: the lines a run and lint report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: Lines of one kind shown before the rest are counted ("... and 12 more files skipped").
SHOWN_PER_KIND = 20


@dataclass
class ConversionReport:
    """``converters``: identity of each converter used (format -> :meth:`Converter.identity`);
    ``formats``: document id -> format of every converted document; ``skipped``: (file, reason)
    of files left out; ``empty``: files converted to empty text (kept, indexed by their title);
    ``notes``: (file, note) such as a guessed encoding; ``unsupported``: files of other suffixes,
    by suffix, not read; ``changed``: converters whose identity differs from the last time this
    folder was read with the same cache; ``pending``: conversion-cache entries (key parts,
    value) written only once the run's data is accepted, so bad input leaves no entry."""

    converters: dict[str, str] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    unsupported: Counter[str] = field(default_factory=Counter)
    changed: list[str] = field(default_factory=list)
    cache_hits: int = 0
    pending: list[tuple[dict, dict]] = field(default_factory=list)

    @property
    def problems(self) -> list[tuple[str, str]]:
        """``(file, what)`` for every file skipped or converted to empty text (what ``strict`` refuses)."""
        return [(file, f"skipped: {reason}") for file, reason in self.skipped] + [
            (file, "converted to empty text (nothing readable in it)") for file in self.empty]

    def warnings(self) -> list[str]:
        """Every line a user should read, each kind cut at :data:`SHOWN_PER_KIND` with a count of the rest."""
        lines = [f"corpus changed because {change}" for change in self.changed]
        for kind, entries in (("skipped or empty files", [f"{file}: {what}" for file, what in self.problems]),
                              ("notes", [f"{file}: {note}" for file, note in self.notes])):
            lines += entries[:SHOWN_PER_KIND]
            if len(entries) > SHOWN_PER_KIND:
                lines.append(f"... and {len(entries) - SHOWN_PER_KIND} more {kind}")
        if self.unsupported:
            shown = ", ".join(f"{suffix or '(no suffix)'} x{n}" for suffix, n in sorted(self.unsupported.items()))
            lines.append(f"{sum(self.unsupported.values())} files with suffixes ragexp does not read were ignored ({shown})")
        return lines

    def summary(self) -> dict:
        """The report as a run records it (``meta.corpus_conversion``)."""
        return {
            "converters": dict(self.converters),
            "converted": dict(Counter(self.formats.values())),
            "skipped": [list(entry) for entry in self.skipped],
            "empty": list(self.empty),
            "notes": [list(entry) for entry in self.notes],
            "unsupported": dict(self.unsupported),
            "cache_hits": self.cache_hits,
        }
