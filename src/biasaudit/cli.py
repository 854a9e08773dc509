"""The ``biasaudit`` command: a thin shell over the library.

This is the only place where an exception becomes a message and an exit code:
0 success, 1 some requests failed or the run stopped, 2 a usage or input error,
130 interrupted. Set ``BIASAUDIT_DEBUG=1`` to get the traceback instead.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from . import __version__
from .errors import BiasauditError
from .secrets import RedactingFilter, redact

F = TypeVar("F", bound=Callable[..., Any])


def _reports_errors(command: F) -> F:
    """Turn biasaudit errors into one clean line on stderr and the right exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BiasauditError as error:
            if os.environ.get("BIASAUDIT_DEBUG"):
                raise
            click.echo(f"error: {redact(str(error))}", err=True)
            run_dir = getattr(error, "run_dir", None)
            if run_dir:
                click.echo(f"run: {run_dir}")
            sys.exit(error.exit_code)
        except (KeyboardInterrupt, asyncio.CancelledError):
            click.echo("interrupted: answers received so far are in the cache", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="biasaudit")
def cli() -> None:
    """Audit large language models for bias in the decisions built on them."""


@cli.command()
@click.argument("prompts", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--model", "-m", required=True, help="provider/model, e.g. openai/gpt-4o-mini, sim/biased.")
@click.option("--base-url", help="API root of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.")
@click.option(
    "--api-key-env",
    metavar="NAME",
    help="Environment variable holding the API key (default: the provider's, e.g. OPENAI_API_KEY; "
    "none for self-hosted servers).",
)
@click.option("--concurrency", default=16, show_default=True, type=click.IntRange(1, 4096),
              help="Most requests in flight; lowered automatically on rate limits.")
@click.option("--rpm", type=click.FloatRange(min=0, min_open=True), help="Most requests per minute.")
@click.option("--max-retries", default=6, show_default=True, type=click.IntRange(0, 100),
              help="Retries of a failed request (transient errors only).")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds one attempt may take.")
@click.option("--runs-dir", default=Path("runs"), show_default=True, type=click.Path(path_type=Path),
              help="Where run directories go.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Response cache file [default: RUNS_DIR/cache.sqlite].")
@click.option("--replay", is_flag=True, help="Answer only from the cache; never touch the network.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Processes sharing the requests; one drives about one core "
              "(worth it above a few hundred requests per second).")
@_reports_errors
def fanout(prompts: Path, **options: Any) -> None:
    """Send every prompt in PROMPTS.jsonl to a model, with caching, retries and rate limits.

    Each line is {"id": ..., "messages": [...]} (chat) or {"id": ..., "prompt": "..."}
    (legacy completions), with optional "params" (max_tokens, temperature, top_p,
    logprobs, top_logprobs, n, seed, stop) and "replicate" (int). Exit status: 0 all
    answered, 1 some failed, 2 bad input.
    """
    from .fanout import FanoutOptions
    from .fanout import fanout as run

    result = run(prompts, FanoutOptions(**options, command=["biasaudit", *sys.argv[1:]]))
    manifest, counts = result.manifest, result.manifest.counts
    label = " (simulated model)" if manifest.simulated else ""
    answered = counts.requests - counts.failures
    click.echo(
        f"fanout of {counts.requests} prompts to {options['model']}{label}: {answered} answered, "
        f"{counts.failures} failed, {counts.refusals} refused; {counts.cache_hits} from cache, "
        f"{counts.sent} requests sent, {counts.retries} retries, "
        f"{manifest.usage.input_tokens + manifest.usage.output_tokens} tokens"
    )
    for version, n in sorted(manifest.model_versions.items()):
        click.echo(f"model version reported: {version} ({n})")
    if counts.failures:
        click.echo(f"{counts.failures} prompts failed; see 'error' in responses.jsonl", err=True)
    click.echo(f"run: {result.run_dir}")
    sys.exit(result.exit_code)


@cli.group()
def cache() -> None:
    """Inspect the response cache."""


@cache.command("stats")
@click.option("--runs-dir", default=Path("runs"), show_default=True, type=click.Path(path_type=Path))
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Cache file [default: RUNS_DIR/cache.sqlite].")
@_reports_errors
def cache_stats(runs_dir: Path, cache_path: Path | None) -> None:
    """Entries, size and hit counts by model."""
    from .cache import ResponseCache

    path = cache_path or runs_dir / "cache.sqlite"
    if not path.exists():
        raise BiasauditError(f"no cache at {path}")
    with ResponseCache(path, readonly=True) as store:
        rows = store.stats()
    size = path.stat().st_size + sum(
        p.stat().st_size for p in path.parent.glob(path.name + "-*") if p.is_file()
    )
    click.echo(f"cache: {path} ({_human_bytes(size)} on disk)")
    header = f"{'model':<44} {'entries':>9} {'stored':>10} {'hits':>9}  newest"
    click.echo(header)
    for row in rows:
        newest = datetime.fromtimestamp(row.last, UTC).strftime("%Y-%m-%d %H:%M")
        click.echo(
            f"{row.model_id:<44} {row.entries:>9} {_human_bytes(row.body_bytes):>10} "
            f"{row.hits:>9}  {newest}"
        )
    click.echo(
        f"{'total':<44} {sum(r.entries for r in rows):>9} "
        f"{_human_bytes(sum(r.body_bytes for r in rows)):>10} {sum(r.hits for r in rows):>9}"
    )


@cli.command()
def providers() -> None:
    """List the provider names biasaudit knows, with what their endpoints can do."""
    from .providers import KNOWN_PROVIDERS

    click.echo(f"{'provider':<11} {'base URL':<40} {'key variable':<19} {'logprobs':<9} note")
    for name, info in KNOWN_PROVIDERS.items():
        caps = info.capabilities
        logprobs = {True: "yes", False: "no", None: "unknown"}[caps.logprobs]
        if caps.logprobs and caps.max_top_logprobs:
            logprobs += f" ({caps.max_top_logprobs})"
        click.echo(
            f"{name:<11} {info.base_url or '(--base-url)':<40} {info.key_env or '-':<19} "
            f"{logprobs:<9} {info.note}"
        )
    click.echo("any other name with --base-url: an OpenAI-compatible server")


def _human_bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _configure_logging() -> None:
    """``BIASAUDIT_LOG=info|debug`` logs retries (and, at debug, the SDKs' requests) to stderr.

    Every line passes through the redacting filter, so no key reaches a log.
    """
    level = os.environ.get("BIASAUDIT_LOG", "").upper()
    if not level:
        return
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    names = ["biasaudit"] + (["openai", "anthropic", "httpx2", "httpx"] if level == "DEBUG" else [])
    for name in names:
        named = logging.getLogger(name)
        named.setLevel(level)
        named.addHandler(handler)


def main() -> None:
    _configure_logging()
    cli(prog_name="biasaudit")
