"""Chat messages as one prompt text, for scoring an answer as a continuation.

Scoring a label as a continuation (``--scoring continuation``) uses the legacy
completions endpoint, which takes one text, not chat messages. The messages
are rendered into the text a chat endpoint would have built from them, with
the model's chat template, up to where the assistant's answer starts; each
label is then appended and scored (:mod:`._continuation`).
lm-evaluation-harness's ``--apply_chat_template`` does the same with the
tokenizer's template.

Templates (``--chat-template``):

- ``model`` (the default): the model's own, where biasaudit can read it: a
  local GGUF model carries it in its metadata (``tokenizer.chat_template``);
- ``chatml``: ChatML's markers (``<|im_start|>role ... <|im_end|>``), the format
  of Qwen, SmolLM, Hermes and many others;
- ``plain``: role-named paragraphs ending in ``Answer:``, the label after a
  space, for base models without a chat format (davinci-002, babbage-002);
- a file: a Jinja chat template in Hugging Face's format (``.jinja``), or a
  ``tokenizer_config.json`` holding one with its ``bos_token`` and
  ``eos_token``, as a served model's repository has it.

Jinja templates are rendered in a sandbox (no attribute access outside the
template's data, no file or network access) with ``messages``,
``add_generation_prompt=True``, ``bos_token``, ``eos_token`` and
``raise_exception``. Where the template writes ``bos_token`` itself, that
leading BOS is dropped from the text, since a completions endpoint adds the
model's BOS token itself (a template that writes its first marker literally,
as SmolLM2's does with the ``<|im_start|>`` its tokenizer calls BOS, is kept).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.providers import ModelChatTemplate
from biasaudit.textfiles import brief

__all__ = ["BUILT_IN_TEMPLATES", "ChatTemplate", "resolve_chat_template"]

BUILT_IN_TEMPLATES = ("model", "chatml", "plain")

# Written for biasaudit from ChatML's published format.
_CHATML = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_PLAIN_ROLES = {"system": "", "user": "", "assistant": "Answer: "}


@dataclass(frozen=True)
class ChatTemplate:
    """How messages become one prompt text, and what joins the answer to it.

    Attributes
    ----------
    name:
        ``model``, ``chatml``, ``plain`` or the file's path: what the run records.
    source:
        The Jinja template (None: ``plain``, rendered without Jinja).
    answer_prefix:
        What goes between the rendered text and the answer (``" "`` for ``plain``).
    """

    name: str
    source: str | None
    bos_token: str = ""
    eos_token: str = ""
    answer_prefix: str = ""

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The prompt text for ``messages``, up to where the assistant's answer starts.

        Raises
        ------
        UsageError
            The template fails on these messages (it raised, or is not valid Jinja).
        """
        if self.source is None:
            return _render_plain(messages)
        text = self._render_jinja(messages)
        writes_bos = "bos_token" in (self.source or "")
        if writes_bos and self.bos_token and text.startswith(self.bos_token):
            text = text[len(self.bos_token) :]
        return text

    def _render_jinja(self, messages: Sequence[Mapping[str, Any]]) -> str:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise jinja2.TemplateError(message)

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.globals["raise_exception"] = raise_exception
        try:
            template = environment.from_string(self.source or "")
            return template.render(
                messages=[dict(m) for m in messages],
                add_generation_prompt=True,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except jinja2.TemplateError as error:
            raise UsageError(f"chat template {self.name}: {error}") from None


def _render_plain(messages: Sequence[Mapping[str, Any]]) -> str:
    parts = [_PLAIN_ROLES.get(str(m.get("role")), "") + str(m.get("content", "")) for m in messages]
    return "\n\n".join([*parts, "Answer:"])


def resolve_chat_template(choice: str | None, model: ModelChatTemplate | None) -> ChatTemplate:
    """The template ``choice`` names (None: ``model``), given the model's own if known.

    Raises
    ------
    UsageError
        ``model`` where the model's template cannot be read, or a file that is
        missing or holds no template.
    """
    choice = choice or "model"
    if choice == "model":
        if model is None:
            raise UsageError(
                "--scoring continuation renders the chat prompt as one text, and this "
                "model's chat template cannot be read here: give --chat-template chatml, "
                "plain (base models) or FILE (a .jinja template, or the model's "
                "tokenizer_config.json)"
            )
        return ChatTemplate("model", model.source, model.bos_token, model.eos_token)
    if choice == "chatml":
        return ChatTemplate("chatml", _CHATML)
    if choice == "plain":
        return ChatTemplate("plain", None, answer_prefix=" ")
    return _template_file(Path(choice))


def _template_file(path: Path) -> ChatTemplate:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise UsageError(
            f"chat template {path}: {reason} (built in: {', '.join(BUILT_IN_TEMPLATES)})"
        ) from None
    if path.suffix != ".json":
        return ChatTemplate(str(path), text)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"chat template {path}, line {error.lineno}: {error.msg}") from None
    source = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(source, list):  # several named templates: take the default one
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        source = named.get("default")
    if not isinstance(source, str):
        raise UsageError(
            f"chat template {path}: no 'chat_template' string in it (found {brief(source)})"
        )
    bos, eos = (_token_text(config.get(key)) for key in ("bos_token", "eos_token"))
    return ChatTemplate(str(path), source, bos, eos)


def _token_text(value: object) -> str:
    """A special token as tokenizer_config.json gives it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""
