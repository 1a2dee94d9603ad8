"""A corpus folder (possibly uploaded, so untrusted) cannot pull in files from elsewhere through
symbolic links: a link to a file outside the folder is reported as skipped and never read; a link
inside the folder is read as the file it names."""

from __future__ import annotations

import pytest

from ragexp.data.loaders.corpus import load_corpus
from ragexp.errors import RagexpInputError

SECRET = "aws_secret_access_key = sk-ragexp-TEST-symlink"


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "credentials.txt").write_text(SECRET + "\n", encoding="utf-8")
    root = tmp_path / "upload"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "retries.md").write_text("# Retries\nDeliveries are retried for 24 hours.\n", encoding="utf-8")
    (root / "notes.txt").symlink_to(tmp_path / "home" / "credentials.txt")
    (root / "retries-again.md").symlink_to(root / "guides" / "retries.md")
    return root


def test_a_link_out_of_the_folder_is_skipped_and_reported_never_read(corpus):
    loaded = load_corpus(corpus)
    assert sorted(loaded) == ["guides/retries", "retries-again"]  # the link inside the folder is read
    assert all(SECRET not in document.text for document in loaded.values())
    assert loaded.conversion.skipped == [("notes.txt", "a symbolic link to a file outside the corpus folder (not read)")]
    with pytest.raises(RagexpInputError, match="outside the corpus folder"):
        load_corpus(corpus, strict=True)
