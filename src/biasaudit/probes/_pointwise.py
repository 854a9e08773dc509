"""The pointwise probe: a label from a fixed set, turned into an expected score.

The model is asked about one item and answers with a label y from a fixed set
Y (``Yes``/``No``, or ``1``..``5``), each label carrying a value gamma_y. The
item's score is the expected value under the label probabilities normalised
over Y,

.. math:: s = \\sum_{y \\in Y} P_n(y)\\, \\gamma_y, \\qquad
          P_n(y) = \\frac{P(y)}{\\sum_{y' \\in Y} P(y')},

as in Chen, Ji & Evans, "The Mismeasure of Man and Models" (2024) and Cyberey,
Ji & Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from
LLMs?" (2025). P comes from one of three paths:

- ``"logprobs"``: the first answer token's ``top_logprobs``, with the
  probabilities of a label's tokenisation variants (``"Yes"``, ``" Yes"``,
  ``"yes"``, ``"Yes."``) added together;
- ``"continuation"``: every label scored whole as the continuation of the
  chat prompt rendered with the model's chat template, P(y) the product of
  its tokens' probabilities (the sum of their logprobs), from a legacy
  completions endpoint that echoes prompts (vLLM, llama.cpp, SGLang, TGI):
  lm-evaluation-harness's ``loglikelihood``. A label of several tokens
  ("Strongly agree", "10") counts whole, not by its first token, and labels
  that share a first token are told apart. One request per label; the label
  is scored as written (no case or spacing variants). An item whose labels
  are not all scored has no score: normalising over the labels that were
  would favour them (see :mod:`._continuation` and :mod:`._chat_template`);
- ``"samples"``: the label frequencies among n sampled answers (temperature
  1), for endpoints without logprobs.

An answer outside Y is *irregular*: counted, never an error. An item whose
answers put no probability on Y at all has no score (NaN).

On the sample path a score is an estimate from n answers, with standard error
sqrt(Var_P(gamma) / n) (``score_se`` in ``scores.csv``). The audit's bootstrap
intervals resample candidates, whose scores carry that noise, so fewer
samples give wider intervals; the number of samples behind each score is
kept with it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from biasaudit.errors import UsageError
from biasaudit.probes._chat_template import ChatTemplate
from biasaudit.probes._continuation import continuation_logprob
from biasaudit.providers import (
    Capabilities,
    FirstTokenLogprobs,
    ModelRequest,
    ModelResponse,
    SamplingParams,
)

__all__ = ["LabelScore", "PointwiseProbe", "ScoringChoice", "ScoringPath"]

ScoringPath = Literal["logprobs", "samples", "continuation"]
ScoringChoice = Literal["auto", "logprobs", "samples", "continuation"]

_MAX_TOP_LOGPROBS = 20  # what OpenAI and vLLM's default allow
# Each label's common spellings ("Yes", " Yes", "yes") fit in three places per
# label; more alternatives cost response size (measured: 20 instead of 5 makes a
# loopback audit a third slower) for mass that is almost always negligible.
_MIN_TOP_LOGPROBS = 10


def top_logprobs_for(capabilities: Capabilities, given: int | None, default: int) -> int:
    """The alternatives a probe asks for: ``given`` as it is, where the endpoint gives that
    many (one of unknown make is tried: llama.cpp gives more than 20), else ``default``
    capped at what the endpoint gives (and at 20, which every host with logprobs gives).

    Raises
    ------
    UsageError
        ``given`` is above the most the endpoint is known to give.
    """
    most = capabilities.max_top_logprobs
    if given is not None:
        if most is not None and given > most:
            raise UsageError(
                f"this endpoint gives at most {most} top logprobs; --top-logprobs {given} "
                "asks for more"
            )
        return given
    return min(default, _MAX_TOP_LOGPROBS, most or _MAX_TOP_LOGPROBS)


# Enough for "Yes." or "4/5" when sampling; the label is the first word.
_SAMPLE_MAX_TOKENS = 3
_FIRST_WORD = re.compile(r"[^\W_]+")
_EDGE_PUNCTUATION = " \t\n\r.,;:!?*\"'`()[]{}"


def canonical_label(text: str) -> str:
    """How a token or an answer is compared with a label: trimmed, unquoted, case-folded."""
    return text.strip(_EDGE_PUNCTUATION).casefold()


@dataclass(frozen=True)
class LabelScore:
    """What the answer(s) about one item say.

    Attributes
    ----------
    score:
        The sum over labels of P_n(y) * gamma_y, or NaN when no answer put probability on any label.
    probabilities:
        P_n over the labels (empty when the score is NaN).
    path:
        ``"logprobs"``, ``"continuation"`` or ``"samples"``: how P was obtained.
    n:
        Answers behind the score: 1 on the logprob and continuation paths, the
        number of samples that named a label on the sample path.
    irregular:
        Answers outside the label set: the first token (logprob path) or the
        samples that named no label.
    label_mass:
        Logprob and continuation paths: the raw probability put on the labels
        before normalising (a small value means the model mostly wanted to say
        something else).
    answer:
        The first token, the most likely label (continuation), or the most
        frequent sampled answer.
    """

    score: float
    probabilities: dict[str, float]
    path: ScoringPath
    n: int
    irregular: int
    label_mass: float | None = None
    answer: str | None = None

    @property
    def scored(self) -> bool:
        return not math.isnan(self.score)


class PointwiseProbe:
    """Asks for one label per item and scores the answer; see the module docstring.

    Parameters
    ----------
    labels:
        Label -> value gamma_y, e.g. ``{"Yes": 1, "No": 0}`` or ``{"1": 1, ..., "5": 5}``.
    path:
        ``"logprobs"``, ``"continuation"`` or ``"samples"``.
    template:
        Continuation path: how the chat messages become one prompt text.
    samples:
        Answers sampled per item on the sample path.
    temperature:
        Sampling temperature on the sample path.
    top_logprobs:
        Alternatives asked for on the logprob path.
    """

    kind = "pointwise"

    def __init__(
        self,
        labels: Mapping[str, float],
        *,
        path: ScoringPath = "logprobs",
        samples: int = 20,
        temperature: float = 1.0,
        top_logprobs: int = _MIN_TOP_LOGPROBS,
        template: ChatTemplate | None = None,
    ) -> None:
        if len(labels) < 2:
            raise UsageError("a pointwise probe needs at least two labels")
        self.labels = dict(labels)
        self._by_canonical = {canonical_label(label): label for label in self.labels}
        if len(self._by_canonical) != len(self.labels):
            raise UsageError(f"labels {list(self.labels)} differ only in case or punctuation")
        if samples < 1:
            raise UsageError("samples must be at least 1")
        self.path, self.samples = path, samples
        self.temperature, self.top_logprobs = temperature, top_logprobs
        if path == "continuation" and template is None:
            raise UsageError("the continuation path needs a chat template")
        self.template = template
        # The label (or None) of each logprob token seen so far: a run meets few
        # distinct tokens, so most of its answers are read by lookups alone.
        self._token_labels: dict[str, str | None] = {}

    @classmethod
    def for_endpoint(
        cls,
        labels: Mapping[str, float],
        capabilities: Capabilities,
        *,
        scoring: ScoringChoice = "auto",
        samples: int = 20,
        temperature: float = 1.0,
        top_logprobs: int | None = None,
        template: ChatTemplate | None = None,
    ) -> PointwiseProbe:
        """The probe for an endpoint: logprobs where it can give them, else samples.

        ``scoring="auto"`` takes the logprob path unless the endpoint is known
        to give no logprobs (or no alternatives); an endpoint of unknown make
        is tried with logprobs, and a run it refuses stops with a message
        naming ``--scoring samples``. ``top_logprobs`` defaults to three per
        label, at least 10, at most what the endpoint allows (and 20); one given
        is asked for as it is (:func:`top_logprobs_for`).
        ``scoring="continuation"`` is never chosen by ``auto`` (it costs one
        request per label) and needs ``template``.

        Raises
        ------
        UsageError
            ``scoring="logprobs"`` for an endpoint known to give none;
            ``"continuation"`` for one without legacy completions or logprobs;
            ``top_logprobs`` above what the endpoint gives.
        """
        no_logprobs = capabilities.logprobs is False or capabilities.max_top_logprobs == 0
        if scoring == "logprobs" and no_logprobs:
            raise UsageError("this endpoint gives no logprobs: use --scoring samples (or auto)")
        if scoring == "continuation":
            if not capabilities.completions or no_logprobs:
                raise UsageError(
                    "--scoring continuation needs a legacy completions endpoint that echoes "
                    "prompts with logprobs (vLLM, llama.cpp, SGLang, TGI); this one has none"
                )
            return cls(labels, path="continuation", template=template)
        path: ScoringPath = "samples" if scoring == "samples" or no_logprobs else "logprobs"
        default = max(_MIN_TOP_LOGPROBS, 3 * len(labels))
        top = top_logprobs_for(capabilities, top_logprobs, default)
        return cls(labels, path=path, samples=samples, temperature=temperature, top_logprobs=top)

    @property
    def params(self) -> SamplingParams:
        """Sampling parameters of every request this probe sends."""
        if self.path == "logprobs":
            return SamplingParams(max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        if self.path == "continuation":
            return SamplingParams(max_tokens=1, temperature=0.0, echo=True)
        return SamplingParams(
            max_tokens=_SAMPLE_MAX_TOKENS, temperature=self.temperature, n=self.samples
        )

    def request(self, request_id: str, messages: Sequence[dict[str, Any]]) -> ModelRequest:
        """The one request that asks about one item."""
        return ModelRequest(id=request_id, messages=tuple(messages), params=self.params)

    def requests(self, items: Iterable[tuple[str, Sequence[dict[str, Any]]]]) -> list[ModelRequest]:
        """:meth:`request` for each ``(request_id, messages)``, sharing one :attr:`params`
        (continuation: :meth:`continuation_requests`, without their labels)."""
        params = self.params
        if self.path == "continuation":
            return [request for request, _, _ in self.continuation_requests(items)]
        return [
            ModelRequest(id=request_id, messages=tuple(messages), params=params)
            for request_id, messages in items
        ]

    def continuation_requests(
        self, items: Iterable[tuple[str, Sequence[dict[str, Any]]]]
    ) -> list[tuple[ModelRequest, str, str]]:
        """Continuation path: ``(request, item id, label)``, one request per item and label,
        its id ``<item id>|<label>``, its prompt the rendered chat prompt and the label.

        Raises
        ------
        UsageError
            The chat template fails on an item's messages (before anything is sent).
        """
        assert self.template is not None
        params, prefix = self.params, self.template.answer_prefix
        found = []
        for item_id, messages in items:
            text = self.template.render(messages) + prefix
            for label in self.labels:
                request_id = self.continuation_id(item_id, label)
                request = ModelRequest(id=request_id, prompt=text + label, params=params)
                found.append((request, item_id, label))
        return found

    @staticmethod
    def continuation_id(item_id: str, label: str) -> str:
        """Continuation path: the id of the request that scores ``label`` for an item."""
        return f"{item_id}|{label}"

    def label_logprob(self, response: ModelResponse, prompt: str, label: str) -> float | None:
        """Continuation path: log P(label | rendered prompt) from the echo of ``prompt``."""
        assert self.template is not None
        return continuation_logprob(response, prompt, self.template.answer_prefix + label)

    def from_continuations(self, logprobs: Mapping[str, float]) -> LabelScore:
        """Continuation path: the score from every label's log-probability (all of them)."""
        # Normalised from the largest logprob, so labels far below 1e-300 still compare.
        top = max(logprobs[label] for label in self.labels)
        relative = {label: math.exp(logprobs[label] - top) for label in self.labels}
        total = sum(relative.values())
        probabilities = {label: p / total for label, p in relative.items()}
        likeliest = max(probabilities, key=probabilities.__getitem__)
        return LabelScore(
            self._expected(probabilities), probabilities, "continuation", 1, 0,
            math.exp(top) * total, likeliest,
        )  # fmt: skip

    def label_of(self, text: str) -> str | None:
        """The label an answer or token names, or None when it names none."""
        label = self._by_canonical.get(canonical_label(text))
        if label is not None or self.path == "logprobs":
            return label
        first = _FIRST_WORD.search(text)
        return self._by_canonical.get(first.group(0).casefold()) if first else None

    def parse(self, response: ModelResponse) -> LabelScore:
        """Score one response (its logprobs, or its sampled texts)."""
        if self.path == "samples":
            return self._from_samples(response.texts)
        entries = response.logprobs or ()
        return self._from_logprobs(entries[0] if entries else None, response.text)

    def _from_logprobs(self, entry: FirstTokenLogprobs | None, text: str) -> LabelScore:
        chosen = entry.token if entry is not None else text
        irregular = int(self._token_label(chosen) is None)
        mass = dict.fromkeys(self.labels, 0.0)
        known = self._token_labels
        for token, logprob in entry.top if entry is not None else ():
            label = known[token] if token in known else self._token_label(token)
            if label is not None:
                mass[label] += math.exp(logprob)
        total = sum(mass.values())
        if total <= 0.0:
            return LabelScore(math.nan, {}, "logprobs", 0, irregular, 0.0, chosen)
        probabilities = {label: p / total for label, p in mass.items()}
        return LabelScore(
            self._expected(probabilities), probabilities, "logprobs", 1, irregular, total, chosen
        )

    def _token_label(self, token: str) -> str | None:
        """:meth:`label_of` a logprob token, remembered."""
        if token not in self._token_labels:
            self._token_labels[token] = self.label_of(token)
        return self._token_labels[token]

    def _from_samples(self, texts: Sequence[str]) -> LabelScore:
        counts = dict.fromkeys(self.labels, 0)
        for text in texts:
            label = self.label_of(text)
            if label is not None:
                counts[label] += 1
        regular = sum(counts.values())
        irregular = len(texts) - regular
        modal = Counter(texts).most_common(1)[0][0] if texts else None
        if regular == 0:
            return LabelScore(math.nan, {}, "samples", 0, irregular, None, modal)
        probabilities = {label: c / regular for label, c in counts.items()}
        return LabelScore(
            self._expected(probabilities), probabilities, "samples", regular, irregular, None, modal
        )

    def _expected(self, probabilities: Mapping[str, float]) -> float:
        return sum(p * self.labels[label] for label, p in probabilities.items())
