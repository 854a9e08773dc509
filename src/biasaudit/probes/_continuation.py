"""Scoring a given continuation: log P(continuation | prompt) from an echoed prompt.

A legacy completions endpoint asked with ``echo`` and ``logprobs`` returns the
prompt's own tokens, each with its log-probability given the tokens before it
(vLLM, llama.cpp, SGLang, TGI; OpenAI's davinci-002 and babbage-002). Sending
``prompt + continuation`` and summing the logprobs of the continuation's
tokens gives the continuation's whole probability, however it is tokenised:
lm-evaluation-harness's ``loglikelihood`` request. The RUTEd standard test
scores every listed word this way, and the pointwise probe every label
(``--scoring continuation``).

Where the continuation's tokens are
    Servers disagree on the echoed tokens' offsets: some count the characters
    of the prompt as sent, some only the text the tokens decode to, where a
    chat template's special tokens (``<|im_start|>``) decode to nothing; some
    keep the one generated token in the list. So the continuation is found by
    its text, from the end: the last tokens of the prompt whose texts join to
    exactly the continuation. The prompt ends at the last echoed token, or at
    the one before it when that last one is the generated token (its offset
    reaches past the prompt, or the tokens do not line up with the prompt's
    end). A token that straddles the boundary (the prompt's last characters
    and the continuation's first merged into one token), a token without a
    logprob, or tokens that do not join to the continuation give no score:
    the continuation's own probability cannot be told apart then.
"""

from __future__ import annotations

from collections.abc import Sequence

from biasaudit.providers import EchoedToken, ModelResponse

__all__ = ["continuation_logprob"]


def continuation_logprob(response: ModelResponse, prompt: str, continuation: str) -> float | None:
    """log P(``continuation`` | the prompt before it), from ``response.echoed``, the echo of
    ``prompt`` (which ends with ``continuation``); None where it cannot be read (see the
    module docstring)."""
    tokens = response.echoed or ()
    if not tokens or not continuation or not prompt.endswith(continuation):
        return None
    last = tokens[-1]
    lined_up = last.offset + len(last.token) == len(prompt)
    ends = (len(tokens),) if lined_up else (len(tokens) - 1, len(tokens))
    for end in ends:
        found = _suffix_logprob(tokens[:end], continuation)
        if found is not None:
            return found
    return None


def _suffix_logprob(tokens: Sequence[EchoedToken], continuation: str) -> float | None:
    """The summed logprobs of the last tokens when their texts join to ``continuation``."""
    text, total = "", 0.0
    for token in reversed(tokens):
        if len(text) >= len(continuation):
            break
        if token.logprob is None:
            return None
        text = token.token + text
        total += token.logprob
    return total if text == continuation else None
