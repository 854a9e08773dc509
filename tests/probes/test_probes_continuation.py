"""Scoring labels whole as continuations: chat templates, echoed tokens, label scores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from biasaudit.errors import UsageError
from biasaudit.probes import PointwiseProbe, continuation_logprob, resolve_chat_template
from biasaudit.providers import Capabilities, EchoedToken, ModelChatTemplate, ModelResponse

MESSAGES = (
    {"role": "system", "content": "You screen loans."},
    {"role": "user", "content": "Ann: a car. Approve?"},
)
# A template in Hugging Face's format that writes its BOS itself, as Llama 3's does.
WITH_BOS = (
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant] {% endif %}"
)


def echoed(*tokens: tuple[str, float | None], offset_from: int = 0) -> ModelResponse:
    found, offset = [], offset_from
    for token, logprob in tokens:
        found.append(EchoedToken(token=token, logprob=logprob, offset=offset))
        offset += len(token)
    return ModelResponse(texts=("",), echoed=tuple(found))


def test_chatml_renders_every_message_and_opens_the_answer() -> None:
    text = resolve_chat_template("chatml", None).render(MESSAGES)
    assert text == (
        "<|im_start|>system\nYou screen loans.<|im_end|>\n"
        "<|im_start|>user\nAnn: a car. Approve?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_plain_renders_paragraphs_and_joins_the_label_with_a_space() -> None:
    template = resolve_chat_template("plain", None)
    assert template.render(MESSAGES) == "You screen loans.\n\nAnn: a car. Approve?\n\nAnswer:"
    assert template.answer_prefix == " "


def test_the_models_own_template_drops_the_bos_it_writes_itself() -> None:
    own = ModelChatTemplate(WITH_BOS, bos_token="<s>", eos_token="</s>")
    text = resolve_chat_template(None, own).render(MESSAGES)  # None: the model's own
    assert text == "[system] You screen loans.\n[user] Ann: a car. Approve?\n[assistant] "
    # A template whose first marker is the BOS text, written literally, keeps it
    # (SmolLM2's ChatML: its tokenizer calls <|im_start|> BOS, and adds none itself).
    literal = ModelChatTemplate("<|im_start|>{{ messages[0]['content'] }}", "<|im_start|>")
    assert resolve_chat_template("model", literal).render(MESSAGES).startswith("<|im_start|>")


def test_a_model_whose_template_cannot_be_read_is_told_how_to_give_one() -> None:
    with pytest.raises(UsageError, match="--chat-template chatml, plain"):
        resolve_chat_template(None, None)


def test_a_template_file_and_a_tokenizer_config_are_read(tmp_path: Path) -> None:
    jinja = tmp_path / "t.jinja"
    jinja.write_text("{% for m in messages %}{{ m['content'] }}|{% endfor %}")
    assert resolve_chat_template(str(jinja), None).render(MESSAGES) == (
        "You screen loans.|Ann: a car. Approve?|"
    )
    config = tmp_path / "tokenizer_config.json"
    config.write_text(
        json.dumps(
            {
                "bos_token": {"content": "<s>", "lstrip": False},
                "eos_token": "</s>",
                "chat_template": [{"name": "default", "template": WITH_BOS}],
            }
        )
    )
    template = resolve_chat_template(str(config), None)
    assert template.bos_token == "<s>" and template.eos_token == "</s>"
    assert template.render(MESSAGES).startswith("[system]")
    assert template.name == str(config)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        ("{% for m in messages %}", "chat template"),  # not valid Jinja
        ("{{ raise_exception('System role not supported') }}", "System role not supported"),
        ("{{ ''.__class__.__mro__ }}", "chat template"),  # the sandbox refuses
    ],
)
def test_a_broken_template_is_a_usage_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "t.jinja"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=message):
        resolve_chat_template(str(path), None).render(MESSAGES)


def test_a_tokenizer_config_without_a_template_is_named(tmp_path: Path) -> None:
    config = tmp_path / "tokenizer_config.json"
    config.write_text('{"bos_token": "<s>"}')
    with pytest.raises(UsageError, match="no 'chat_template' string"):
        resolve_chat_template(str(config), None)
    config.write_text('{"chat_template": ')
    with pytest.raises(UsageError, match="line 1"):
        resolve_chat_template(str(config), None)


def test_a_continuation_is_found_by_its_text_from_the_prompts_end() -> None:
    prompt = "Approve? Strong yes"
    # Offsets count the prompt as sent; the generated token was left out.
    lined_up = echoed(("Approve?", None), (" Strong", -1.0), (" yes", -0.5))
    assert continuation_logprob(lined_up, prompt, " Strong yes") == pytest.approx(-1.5)
    # llama.cpp: special tokens decode to nothing, so offsets fall short of the prompt,
    # and the one generated token (".") is still in the list.
    hidden = echoed(("", None), ("Approve?", -3.0), (" Strong", -1.0), (" yes", -0.5), (".", -0.1))
    assert continuation_logprob(hidden, "<s>" + prompt, " Strong yes") == pytest.approx(-1.5)


def test_a_continuation_that_cannot_be_told_apart_has_no_logprob() -> None:
    prompt = "Approve? Yes"
    merged = echoed(("Approve", None), ("? Yes", -1.0))  # the label shares a token
    assert continuation_logprob(merged, prompt, " Yes") is None
    missing = echoed(("Approve?", None), (" Yes", None))
    assert continuation_logprob(missing, prompt, " Yes") is None
    assert continuation_logprob(ModelResponse(texts=("",)), prompt, " Yes") is None
    assert continuation_logprob(merged, prompt, " No") is None  # not the prompt's end


def test_label_scores_normalise_whole_label_probabilities() -> None:
    probe = PointwiseProbe(
        {"Strong yes": 1.0, "Maybe": 0.5, "No": 0.0},
        path="continuation",
        template=resolve_chat_template("plain", None),
    )
    answer = probe.from_continuations(
        {"Strong yes": math.log(0.02), "Maybe": math.log(0.06), "No": math.log(0.02)}
    )
    assert answer.probabilities == pytest.approx({"Strong yes": 0.2, "Maybe": 0.6, "No": 0.2})
    assert answer.score == pytest.approx(0.5) and answer.label_mass == pytest.approx(0.1)
    assert answer.path == "continuation" and answer.answer == "Maybe"
    # Labels far below the smallest double still compare.
    tiny = probe.from_continuations({"Strong yes": -900.0, "Maybe": -901.0, "No": -2000.0})
    assert tiny.probabilities["Strong yes"] == pytest.approx(1 / (1 + math.exp(-1)))


def test_continuation_requests_render_once_and_ask_for_each_label() -> None:
    probe = PointwiseProbe.for_endpoint(
        {"Yes": 1.0, "No": 0.0},
        Capabilities(),
        scoring="continuation",
        template=resolve_chat_template("chatml", None),
    )
    asked = probe.continuation_requests([("c1", MESSAGES)])
    assert [(r.id, item, label) for r, item, label in asked] == [
        ("c1|Yes", "c1", "Yes"),
        ("c1|No", "c1", "No"),
    ]
    request = asked[0][0]
    assert request.prompt is not None and request.prompt.endswith("<|im_start|>assistant\nYes")
    assert request.params.echo and request.params.max_tokens == 1


def test_continuation_needs_an_endpoint_that_can_score_one() -> None:
    template = resolve_chat_template("plain", None)
    for capabilities in (Capabilities(completions=False), Capabilities(logprobs=False)):
        with pytest.raises(UsageError, match="legacy completions endpoint that echoes"):
            PointwiseProbe.for_endpoint(
                {"Yes": 1, "No": 0}, capabilities, scoring="continuation", template=template
            )
