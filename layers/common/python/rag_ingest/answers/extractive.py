"""The offline stand-in for a chat model: an extractive answer, the passages' best sentences cited.

No generative model's weights install from a registry reachable here, so the local stack's Converse
route and in-process runs answer with this: the sentences of the passages that share the most words
with the question (``lexical_scores``), each followed by its passage's ``[n]``. It is labelled as a
stand-in wherever it answers, and it never follows a passage's words: it only quotes them.
Imports rag_ingest.answers and rag_ingest.retrieval.rerank.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rag_ingest.answers.ports import Generation
from rag_ingest.answers.prompt import prompt_parts
from rag_ingest.retrieval.rerank import lexical_scores

STAND_IN_NAME = "extractive-stand-in (quotes the passages' best sentences; not a language model)"
NO_ANSWER = "The documents do not answer this question."
MAX_SENTENCES = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def extractive_answer(message: str) -> str:
    """The stand-in's answer to a user message ``rag_ingest.answers.prompt.answer_prompt`` wrote."""
    question, passages = prompt_parts(message)
    # A line is a unit too: a table's row is one line, never half of a sentence.
    sentences = [
        (number, " ".join(sentence.split()))
        for number, text in passages
        for line in text.splitlines()
        for sentence in _SENTENCE_END.split(line)
        if len(sentence.split()) >= 3
    ]
    scores = lexical_scores(question, [sentence for _, sentence in sentences])
    ranked = sorted(range(len(sentences)), key=lambda index: -scores[index])
    chosen = [index for index in ranked[:MAX_SENTENCES] if scores[index] > 0]
    if not chosen:
        return NO_ANSWER
    return " ".join(f"{sentences[index][1]} [{sentences[index][0]}]" for index in sorted(chosen))


def stream_pieces(text: str, words_per_piece: int = 4) -> list[str]:
    """``text`` in the pieces a stream sends, a few words each; joined they are ``text`` again."""
    pieces = re.findall(r"\S+\s*", text)
    return ["".join(pieces[i : i + words_per_piece]) for i in range(0, len(pieces), words_per_piece)]


def count_words(text: str) -> int:
    """A token estimate for the stand-in's usage figures: one per word."""
    return len(text.split())


class ExtractiveAnswerModel:
    """The stand-in as an ``AnswerModel``, in process (where the embedder runs in process too)."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def generate(self, system: str, message: str, *, max_tokens: int) -> Generation:
        """The answer, cut at ``max_tokens`` words as a model stops at its token cap."""
        text, stop_reason = extractive_answer(message), "end_turn"
        if count_words(text) > max_tokens:
            text, stop_reason = " ".join(text.split()[:max_tokens]), "max_tokens"
        return Generation(
            text=text,
            model_id=self.model_id,
            input_tokens=count_words(system) + count_words(message),
            output_tokens=count_words(text),
            stop_reason=stop_reason,
            stand_in=STAND_IN_NAME,
        )

    def stream(self, system: str, message: str, *, max_tokens: int) -> Iterator[str | Generation]:
        generation = self.generate(system, message, max_tokens=max_tokens)
        yield from stream_pieces(generation.text)
        yield generation
