"""Where a generated answer ends: the repetition rules on text fed as a model makes it, and the
local model's decoding loop on crafted token streams (a scripted model, no weights)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch

from ragexp.llm.answer_end import (
    degeneration_start,
    end_at_sentence,
    final_cut,
    most_repeated_sentence,
    ngram_repeat_start,
    repetition_start,
    sentence_repeat_start,
)
from ragexp.llm.local_hf import LoadedWeights, LocalHFModel
from reference_pipelines.generators.llm import LLMGenerator

LOOPING = ("1. Download the app. 2. Open Settings. 3. Select the network you want to reset. "
           "4. Select the network you want to reset. 5. Select the network you want to reset. 6.")


def first_stop(text: str, n: int = 10) -> int | None:
    """Feed ``text`` one character at a time, as a stream; the cut of the first repetition seen."""
    for end in range(1, len(text) + 1):
        at = repetition_start(text[:end], n)
        if at is not None:
            return at
    return None


def test_a_repeated_list_item_is_cut_before_its_second_copy() -> None:
    at = first_stop(LOOPING)
    assert LOOPING[:at] == "1. Download the app. 2. Open Settings. 3. Select the network you want to reset. 4. "
    assert end_at_sentence(LOOPING[:at]) == "1. Download the app. 2. Open Settings. 3. Select the network you want to reset."


def test_a_loop_without_sentence_ends_is_caught_n_words_into_its_second_round() -> None:
    text = "press the button and the light and " * 6
    at = first_stop(text, n=4)
    assert text[:at] == "press the button and the light and "  # one round kept
    assert sentence_repeat_start(text) is None


def test_no_repetition_in_an_ordinary_answer() -> None:
    answer = ("The search endpoint allows 30 requests per minute. The list endpoint allows 60 requests per minute. "
              "Both limits reset every minute. ")
    assert first_stop(answer) is None
    assert ngram_repeat_start("a b c a b c ", 3) == 6 and ngram_repeat_start("a b c a b c", 3) is None  # "c" not complete


def test_sentences_compare_without_case_spacing_or_list_markers() -> None:
    assert sentence_repeat_start("- Reset the router.\n-  reset THE router. ") == 20
    assert sentence_repeat_start("Reset the router. Reset the modem. ") is None
    assert sentence_repeat_start("It is 30. It is 40. ") is None


def test_end_at_sentence_drops_a_half_sentence_and_a_dangling_list_number() -> None:
    assert end_at_sentence("The limit is 30. It resets every") == "The limit is 30."
    assert end_at_sentence('He said "stop." Then the') == 'He said "stop."'
    assert end_at_sentence("Steps:\n1. Open the app.\n2.") == "Steps:\n1. Open the app."
    assert end_at_sentence("no sentence end at all\n2.") == "no sentence end at all"
    assert end_at_sentence("Version 2.0 is out") == "Version 2.0 is out"


def test_most_repeated_sentence_counts_the_answer_as_it_stands() -> None:
    assert most_repeated_sentence(LOOPING) == 3
    assert most_repeated_sentence("Open it. Close it.") == 1
    assert most_repeated_sentence("") == 0


def test_degeneration_into_markers_one_word_or_one_piece_is_caught_where_it_starts() -> None:
    """The issue's answer of 30 list markers passed both older rules (markers are not words, and a
    sentence of markers has no letter); the degeneration rule cuts at the first of the run."""
    markers = "The events are kept for 30 days. " + "1. " * 30
    assert markers[: first_stop(markers)] == "The events are kept for 30 days. "
    assert ngram_repeat_start(markers, 10) is None and sentence_repeat_start(markers) is None  # the older rules
    assert degeneration_start("- - - ") == 0 and degeneration_start("a\n1.\n2.\n3.\n") == 2
    assert degeneration_start("It is the the the the end ") == 10  # one "the" kept
    assert degeneration_start("Wait!!!!!!!!!! ") == 5 and degeneration_start("1.1.1.1.1.1.1.1. ") == 2
    # shapes of the demo run after the label change: citation marks counting up, one list item over and over
    assert degeneration_start("Kept.\n3. [3] [4] [5] [6] [7] ") == 6
    looping = "1. 1.1.0\n2. 2.0.0\n3. 5.0.0\n4. 5.0.0\n5. 5.0.0\n6. 5.0.0\n7. "
    assert end_at_sentence(looping[: degeneration_start(looping)]) == "1. 1.1.0\n2. 2.0.0\n3. 5.0.0"
    for fine in ("Steps: 1. Open it. 2. Tap it. 3. Done. ", "It costs 100000000 USD. ", "very very very good ",
                 "The limits are 10 60 300 per minute. ", "Use v1.2.3 or later. ", "| --- | --- | --- |\n"):
        assert degeneration_start(fine) is None, fine
    assert degeneration_start("1. 1. 1.") is None  # the last marker is not complete yet (no whitespace after it)


# --- the local model's decoding loop, on scripted token streams ---------------------------------


class PieceTokenizer:
    """Token ids are indexes of text pieces; a prompt is one piece naming its script."""

    eos_token_id, pad_token_id, bos_token_id, chat_template = 0, 0, 0, None

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = ["<eos>", *pieces]

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [self.pieces.index(text)]}

    def decode(self, tokens, skip_special_tokens: bool = True) -> str:
        return "".join(self.pieces[t] for t in tokens if t != 0)


class RowCache:
    """The KV cache stand-in: which script and step each batch row is at."""

    def __init__(self, scripts: list[int]) -> None:
        self.scripts, self.steps = scripts, [0] * len(scripts)

    def batch_select_indices(self, index: torch.Tensor) -> None:
        keep = index.tolist()
        self.scripts, self.steps = [self.scripts[i] for i in keep], [self.steps[i] for i in keep]


class ScriptedLM(torch.nn.Module):
    """Emits script ``s`` token by token for a prompt naming it, then end-of-sequence."""

    def __init__(self, tokenizer: PieceTokenizer, scripts: dict[str, list[str]]) -> None:
        super().__init__()
        self.tokenizer, self.names = tokenizer, list(scripts)
        self.streams = [[tokenizer.pieces.index(p) for p in pieces] for pieces in scripts.values()]
        self.config = SimpleNamespace(max_position_embeddings=4096)
        self.generation_config = SimpleNamespace(eos_token_id=0)

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=True, logits_to_keep=1,
                past_key_values=None):
        if past_key_values is None:
            past_key_values = RowCache([self.names.index(self.tokenizer.pieces[int(t)]) for t in input_ids[:, -1]])
        logits = torch.zeros((input_ids.shape[0], 1, len(self.tokenizer.pieces)))
        for row, (script, step) in enumerate(zip(past_key_values.scripts, past_key_values.steps)):
            stream = self.streams[script]
            logits[row, 0, stream[step] if step < len(stream) else 0] = 1.0
            past_key_values.steps[row] += 1
        return SimpleNamespace(logits=logits, past_key_values=past_key_values)


def scripted_model(scripts: dict[str, list[str]], repeat_ngram: int | None) -> LocalHFModel:
    pieces = sorted({p for stream in scripts.values() for p in stream} | set(scripts))
    tokenizer = PieceTokenizer(pieces)
    model = LocalHFModel.__new__(LocalHFModel)
    model.weights = LoadedWeights(ScriptedLM(tokenizer, scripts), tokenizer, "test", 0.0, "scripted", threading.Lock())
    model.device, model.dtype, model.quantization, model.cache, model.batch_size = "cpu", "float32", "none", None, 2
    model.repeat_ngram, model.model_id, model.threads = repeat_ngram, "scripted", 1
    model.threads_setting = 1
    return model


SCRIPTS = {
    "loop": ["1.", " Download", " the", " app.", " 2.", " Reset", " the", " box.", " 3.", " Reset", " the", " box.",
             " 4.", " Reset", " the", " box."],
    "fine": [" Hold", " the", " button", " for", " ten", " seconds."],
    "ends_on_copy": [" Open", " Settings.", " Open", " Settings."],
    "capped": [" Hold", " the", " button.", " Then", " wait", " for", " the", " light", " to", " turn", " green."],
    "markers": [" Kept", " 30", " days.", "\n1.", " 1.", " 1.", " 1.", " 1.", " 1.", " 1.", " 1."],
    # the end shapes #50 found on held-out corpora: a copy cut at a stop string, a copy without its end mark
    "copy_then_stop": [" Open", " Settings.", " Close", " it.", " Open", " Settings.", "\n\n", "Question:"],
    "list_copy_at_eos": ["1.", " Computational", " complexity", " theory", "\n2.", " Computational", " complexity", " theory"],
}


def test_decoding_stops_at_the_repetition_and_keeps_the_text_before_it() -> None:
    model = scripted_model(SCRIPTS, repeat_ngram=10)
    loop, fine, ends = model.complete_batch(["loop", "fine", "ends_on_copy"], max_tokens=16)
    assert (loop.text, loop.finish_reason) == ("1. Download the app. 2. Reset the box. 3. ", "repetition")
    assert loop.completion_tokens == 13  # stopped once " 4." showed the copied sentence had ended
    assert (fine.text, fine.finish_reason) == (" Hold the button for ten seconds.", "eos")
    # a copy that ends the answer (eos, no whitespace after it) is cut too
    assert (ends.text, ends.finish_reason) == (" Open Settings. ", "repetition")
    [capped] = model.complete_batch(["capped"], max_tokens=10)
    assert (capped.text, capped.finish_reason) == (" Hold the button. Then wait for the light to turn", "length")


def test_a_copy_at_the_very_end_is_caught_after_a_stop_string_and_without_an_end_mark() -> None:
    model = scripted_model(SCRIPTS, repeat_ngram=10)
    stopped, listed = model.complete_batch(["copy_then_stop", "list_copy_at_eos"], max_tokens=16, stop=["\n\n"])
    assert (stopped.text, stopped.finish_reason) == (" Open Settings. Close it. ", "repetition")
    assert (listed.text, listed.finish_reason) == ("1. Computational complexity theory\n2. ", "repetition")
    generator = LLMGenerator(scripted_model(SCRIPTS, repeat_ngram=10), max_new_tokens=16)
    assert generator._answer(stopped) == "Open Settings. Close it."
    assert generator._answer(listed) == "1. Computational complexity theory"
    # without the stop, an ordinary answer that ends on new words is left alone
    assert final_cut("Open Settings. Close it.", ["\n\n"], 10, "eos") == ("Open Settings. Close it.", "eos")
    assert final_cut("Open it. Close it", [], 10, "eos") == ("Open it. Close it", "eos")


def test_decoding_stops_where_the_answer_degenerates_and_says_so() -> None:
    [markers] = scripted_model(SCRIPTS, repeat_ngram=10).complete_batch(["markers"], max_tokens=16)
    assert (markers.text, markers.finish_reason) == (" Kept 30 days.\n", "degenerate")  # the markers: none kept
    assert markers.completion_tokens == 7  # stopped once the third marker was complete
    generator = LLMGenerator(scripted_model(SCRIPTS, repeat_ngram=10), max_new_tokens=16)
    assert generator._answer(markers) == "Kept 30 days."


def test_without_repeat_ngram_the_stream_runs_to_the_cap() -> None:
    [loop] = scripted_model(SCRIPTS, repeat_ngram=None).complete_batch(["loop"], max_tokens=15)
    assert loop.finish_reason == "length" and loop.completion_tokens == 15
    assert loop.text == "".join(SCRIPTS["loop"][:15])


def test_the_generator_ends_a_cut_off_answer_after_its_last_whole_sentence() -> None:
    generator = LLMGenerator(scripted_model(SCRIPTS, repeat_ngram=10), max_new_tokens=10)
    model = generator.model
    loop, fine, ends = (generator._answer(r) for r in model.complete_batch(["loop", "fine", "ends_on_copy"], max_tokens=16))
    capped = generator._answer(model.complete_batch(["capped"], max_tokens=10)[0])
    assert loop == "1. Download the app. 2. Reset the box."
    assert fine == "Hold the button for ten seconds."
    assert ends == "Open Settings."
    assert capped == "Hold the button."
    generator.end_at_sentence = False
    assert generator._answer(model.complete_batch(["capped"], max_tokens=10)[0]) == "Hold the button. Then wait for the light to turn"


def test_repeat_ngram_is_checked() -> None:
    from ragexp.errors import RagexpInputError

    with pytest.raises(RagexpInputError, match="integer >= 2"):
        LocalHFModel(repeat_ngram=1)
