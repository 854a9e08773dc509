"""HTTPS endpoints whose TLS cannot work as configured: a certificate this machine does
not trust (self-signed, or signed by a company's own authority), and https:// to a
server that speaks plain HTTP. The SDKs' transport reports both as a connect timeout;
each stops the run at the first request, named with its fix, instead of being retried
for every request. Real servers on 127.0.0.1, certificates made by trustme."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from biasaudit.errors import EndpointUnreachableError, RunAbortedError, UsageError
from biasaudit.providers import resolve_model
from tests.servers import AnthropicServer, OpenAIServer

from .fakes import chat
from .test_providers_wire import run, vllm


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA(organization_name="An organisation's own authority")


@pytest.fixture
def https(authority: trustme.CA) -> Iterator[OpenAIServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)

    class HttpsServer(OpenAIServer):
        tls = context

    with HttpsServer() as server:
        yield server


def test_a_certificate_this_machine_does_not_trust_stops_the_run_with_its_fix(
    https: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(RunAbortedError) as caught:
        run(vllm(https), [chat(f"q{i}", str(i)) for i in range(20)], None, max_retries=6)
    assert isinstance(caught.value.cause, EndpointUnreachableError)
    message = str(caught.value)
    assert f"cannot reach {https.base_url}: its TLS certificate cannot be verified (" in message
    assert "point SSL_CERT_FILE at a bundle" in message and "timed out" not in message


def test_ssl_cert_file_is_the_fix_it_names(
    https: OpenAIServer, authority: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "company-ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    [result] = run(vllm(https), [chat("q")], None)
    assert result.ok, result.error


def test_https_to_a_plain_http_server_stops_the_run_with_its_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TLS_TEST_KEY", "sk-test-0123456789")
    with OpenAIServer() as plain, AnthropicServer() as plain_anthropic:
        for server, name in ((plain, "vllm/m"), (plain_anthropic, "anthropic/m")):
            url = server.base_url.replace("http://", "https://")
            provider = resolve_model(name, base_url=url, api_key_env="TLS_TEST_KEY")
            with pytest.raises(RunAbortedError) as caught:
                run(provider, [chat(f"q{i}", str(i)) for i in range(5)], None, max_retries=6)
            message = str(caught.value)
            assert "the server does not answer in TLS" in message, message
            assert "its address starts http://, not https://" in message
            assert server.request_count == 0


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("missing.pem", None, "no such file"),
        ("empty.pem", "not a certificate\n", "cannot be loaded"),
    ],
)
def test_an_ssl_cert_file_that_cannot_be_loaded_is_one_error_before_anything_is_sent(
    https: OpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    content: str | None,
    said: str,
) -> None:
    """A missing bundle was retried 7 times a prompt as a connection failure that named
    neither the variable nor the file."""
    bundle = tmp_path / name
    if content is not None:
        bundle.write_text(content)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.setenv("TLS_TEST_KEY", "sk-test-0123456789")
    with pytest.raises(UsageError) as caught:
        resolve_model("vllm/m", base_url=https.base_url, api_key_env="TLS_TEST_KEY")
    assert f"SSL_CERT_FILE={str(bundle)!r}" in str(caught.value) and said in str(caught.value)
    assert https.request_count == 0
