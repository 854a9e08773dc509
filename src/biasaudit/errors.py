"""The one exception tree of biasaudit.

Every error the package raises on purpose is a :class:`BiasauditError`. The CLI
is the only place that turns one into a message and an exit code; library users
catch these classes directly. Set ``BIASAUDIT_DEBUG=1`` to make the CLI re-raise
instead of printing, for a full traceback.

::

    BiasauditError                      exit_code
    ├── UsageError                      2   bad command line, spec or input file
    │   ├── InputError                  2   one bad input line (line number, field)
    │   └── StorageUnusableError        2   the cache or runs directory is corrupt or read-only
    ├── ConfigurationError              2   unknown provider, missing key, bad base URL
    │   ├── UnknownProviderError
    │   └── MissingAPIKeyError
    ├── ReplayMissError                 2   --replay and responses are not cached
    ├── ProviderError                   1   one request failed (kept in the run)
    │   ├── TransientProviderError          may succeed if retried
    │   │   ├── RateLimitedError            429 / 529, with retry_after if given
    │   │   └── MalformedResponseError      an answer that cannot be read (never cached)
    │   ├── RequestRejectedError            4xx that retrying will not fix
    │   └── FatalProviderError              every later request would fail too
    │       ├── AuthenticationFailedError
    │       ├── QuotaExhaustedError
    │       ├── LogprobsUnavailableError
    │       ├── EndpointUnreachableError
    │       ├── WaitTooLongError            Retry-After asks for longer than the cap
    │       └── BudgetExceededError         the run's spend reached --max-cost
    ├── StorageFailedError              1   the cache or run directory stopped taking writes
    ├── RunAbortedError                 1   a fatal error stopped the run early
    └── RunInterruptedError           130   Ctrl-C (143 SIGTERM, 129 SIGHUP); what arrived is cached

Messages never contain secrets: everything raised from provider responses goes
through :func:`biasaudit.secrets.redact` first.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationFailedError",
    "BiasauditError",
    "BudgetExceededError",
    "ConfigurationError",
    "EndpointUnreachableError",
    "FatalProviderError",
    "InputError",
    "LogprobsUnavailableError",
    "MalformedResponseError",
    "MissingAPIKeyError",
    "ProviderError",
    "QuotaExhaustedError",
    "RateLimitedError",
    "ReplayMissError",
    "RequestRejectedError",
    "RunAbortedError",
    "RunInterruptedError",
    "StorageFailedError",
    "StorageUnusableError",
    "TransientProviderError",
    "UnknownProviderError",
    "UsageError",
    "WaitTooLongError",
]


class BiasauditError(Exception):
    """Base of every error biasaudit raises on purpose; its message is shown to the user."""

    exit_code = 1


class UsageError(BiasauditError):
    """The command line, a spec or an input file is not usable as given."""

    exit_code = 2


class InputError(UsageError):
    """One line of an input file is malformed.

    Attributes
    ----------
    path, line, field:
        Where the problem is: ``line`` counts from 1, ``field`` is a dotted path
        such as ``params.top_logprobs`` (``None`` when the whole line is bad).
    """

    def __init__(self, path: str, line: int, field: str | None, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        where = f"{path}, line {line}" + (f", field '{field}'" if field else "")
        super().__init__(f"{where}: {problem}")


class ConfigurationError(UsageError):
    """The model, endpoint or credentials are not set up to run."""


class UnknownProviderError(ConfigurationError):
    """The provider part of ``provider/model`` names nothing biasaudit can reach."""


class MissingAPIKeyError(ConfigurationError):
    """The environment variable holding the API key is unset; raised before any request."""


class StorageUnusableError(UsageError):
    """The response cache or the runs directory cannot be used: corrupt, or read-only.

    Raised before anything is sent; the message names the file and what to do.
    """


class StorageFailedError(BiasauditError):
    """The cache or the run directory stopped taking writes during a run (a full disk).

    The run stops sending at once and is marked ``failed``; every answer it
    recorded is in the cache, so a rerun sends only what never arrived.
    """

    def __init__(self, message: str, run_dir: str | None = None) -> None:
        self.run_dir = run_dir
        super().__init__(message)


class ReplayMissError(BiasauditError):
    """A replay needed responses that are not in the cache."""

    exit_code = 2

    def __init__(self, missing: int, total: int, cache_path: str, examples: list[str]) -> None:
        self.missing, self.total = missing, total
        shown = ", ".join(examples[:5])
        super().__init__(
            f"replay: {missing} of {total} prompts are not in the cache {cache_path} "
            f"(e.g. {shown}); run without --replay to fetch them"
        )


class ProviderError(BiasauditError):
    """A request to a model endpoint failed.

    Attributes
    ----------
    status:
        HTTP status, when the endpoint answered with one.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class TransientProviderError(ProviderError):
    """A failure that the same request may not meet again: timeouts, 5xx, dropped links.

    ``retry_after`` holds the delay in seconds the endpoint asked for, if any.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status)


class RateLimitedError(TransientProviderError):
    """The endpoint asked us to slow down (429, Anthropic 529): fewer requests in flight."""


class MalformedResponseError(TransientProviderError):
    """The endpoint answered, but not with anything biasaudit can read.

    A body of the wrong shape, not JSON, too large for what the request allows,
    or not HTTP at all. Retried like any transient failure, and never cached.
    """


class RequestRejectedError(ProviderError):
    """The endpoint refused this request (400, 404, 422...); retrying cannot help."""


class FatalProviderError(ProviderError):
    """A failure that every later request would meet too; it stops the run."""


class AuthenticationFailedError(FatalProviderError):
    """The endpoint rejected the API key (401/403)."""


class QuotaExhaustedError(FatalProviderError):
    """The account is out of quota or credit; waiting will not help."""


class LogprobsUnavailableError(FatalProviderError):
    """The endpoint cannot return the log-probabilities the request asked for."""


class EndpointUnreachableError(FatalProviderError):
    """No request has ever reached the endpoint: wrong base URL or server down."""


class WaitTooLongError(FatalProviderError):
    """The endpoint asked to wait (``Retry-After``) longer than the run waits for one retry."""


class BudgetExceededError(FatalProviderError):
    """The run's spend reached its ``--max-cost``; later requests are not sent."""


class RunAbortedError(BiasauditError):
    """A fatal provider error stopped a run; what arrived before it is kept."""

    def __init__(self, cause: BiasauditError, run_dir: str | None = None) -> None:
        self.cause, self.run_dir = cause, run_dir
        super().__init__(f"run stopped: {cause}")


class NoAnswerError(BiasauditError):
    """Every request of a run failed: it has no answer to compute a figure from.

    The run is recorded ``failed`` (its responses say why each request failed) and no
    figures or report are written; the exit code is 1.
    """

    def __init__(self, message: str, run_dir: str | None = None) -> None:
        self.run_dir = run_dir
        super().__init__(message)


class RunInterruptedError(BiasauditError):
    """A signal stopped a run (Ctrl-C, SIGTERM, the terminal closing: SIGHUP); every answer
    received is in the cache. The exit status is the shell's for that signal, 128 + its
    number: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""

    exit_code = 130

    def __init__(
        self, run_dir: str | None = None, *, note: str | None = None, signum: int = 2
    ) -> None:
        self.run_dir = run_dir
        self.exit_code = 128 + signum
        super().__init__(
            f"interrupted ({signal_name(signum)}): the answers received so far are in the "
            "cache; run again to resume" + (f"; {note}" if note else "")
        )


def signal_name(signum: int) -> str:
    """``SIGTERM``; ``Ctrl-C`` for SIGINT; ``SIGHUP: the terminal closed``."""
    import signal

    if signum == signal.SIGINT:
        return "Ctrl-C"
    name = signal.Signals(signum).name if signum in set(signal.Signals) else f"signal {signum}"
    return f"{name}: the terminal closed" if name == "SIGHUP" else name
