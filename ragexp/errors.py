"""One error type for bad user input, rendered as a single line and exit code 2."""

from __future__ import annotations

from os import PathLike

USAGE_EXIT_CODE = 2


class RagexpInputError(Exception):
    """Bad input from the user: a file, a config value, an eval-set line.

    ``str(err)`` is one line naming where the problem is: ``FILE:LINE: field 'F': message``.
    The CLI prints it without a traceback and exits with :data:`USAGE_EXIT_CODE`.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | PathLike[str] | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.line = line
        self.field = field
        super().__init__(self.render())

    def render(self) -> str:
        """The one line; a file name or field taken from the input (a JSON key ``"\\n"``) shows its
        control characters escaped, so it cannot break the line."""
        where = ""
        if self.file is not None:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
            where = _escaped(where) + ": "
        field = f"field '{_escaped(self.field)}': " if self.field else ""
        return f"{where}{field}{self.message}"


def _escaped(text: str) -> str:
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class TrackingUnavailable(RuntimeError):
    """The run was computed and saved locally, but MLflow could not be written (exit code 1)."""


class SweepRefused(BaseException):
    """Bad input found before a sweep starts (its ``args[0]`` is the :class:`RagexpInputError`),
    printed by ``ragexp run`` as its one line with :data:`USAGE_EXIT_CODE`. A ``BaseException``:
    Hydra turns a sweep callback's ``Exception`` into a ``UserWarning`` and sweeps on. Defined
    here, not with the sweep callback, so that ``ragexp run --help`` does not import MLflow."""
