"""The reports' figures on machines unlike the developer's.

A user whose home cannot be written (a container run as a user without one, a
read-only home on a cluster) gets the same quiet output as anyone: matplotlib is given
a private folder of that user's in the temporary directory, kept between runs, instead
of warning on every command. A user's own matplotlibrc does not change the figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from biasaudit.render import figures


def _environment(tmp_path: Path) -> dict[str, str]:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the home should be\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME",
                                                            "XDG_CACHE_HOME")}  # fmt: skip
    (tmp_path / "tmp").mkdir()
    env.update(HOME=str(blocker / "home"), TMPDIR=str(tmp_path / "tmp"))
    return env


def test_a_home_that_cannot_be_written_gets_no_warning_and_keeps_the_font_cache(
    tmp_path: Path,
) -> None:
    env = _environment(tmp_path)
    command = [sys.executable, "-m", "biasaudit", "run", "ruted", "--model", "sim/fair",
               "--templates", "1", "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    for attempt in (1, 2):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "atplotlib" not in done.stderr, (attempt, done.stderr)
    own = tmp_path / "tmp" / f"biasaudit-matplotlib-{os.getuid()}"
    assert own.is_dir() and own.stat().st_mode & 0o777 == 0o700
    assert list(own.glob("fontlist*.json"))  # the font cache, built once and kept
    assert [p.name for p in (tmp_path / "tmp").iterdir()] == [own.name]  # nothing left behind


def test_a_folder_of_that_name_that_is_not_private_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    monkeypatch.setattr(figures.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    shared = tmp_path / "tmp" / f"biasaudit-matplotlib-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # another user could have made it, and could read what is put there
    figures._settle_config_dir()
    assert "MPLCONFIGDIR" not in os.environ
    shared.chmod(0o700)
    figures._settle_config_dir()
    assert os.environ["MPLCONFIGDIR"] == str(shared)


def test_a_writable_home_and_a_chosen_folder_are_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    figures._settle_config_dir()
    assert "MPLCONFIGDIR" not in os.environ
    monkeypatch.setenv("HOME", str(tmp_path / "not-a-folder" / "home"))
    (tmp_path / "not-a-folder").write_text("x", encoding="utf-8")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mine"))
    figures._settle_config_dir()
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "mine")


def test_a_user_without_any_home_gets_no_folder_named_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    monkeypatch.setattr(figures.os.path, "expanduser", lambda path: path)  # no $HOME, no entry
    monkeypatch.setattr(figures.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    figures._settle_config_dir()
    assert not (tmp_path / "~").exists()
    assert os.environ["MPLCONFIGDIR"] == str(
        tmp_path / "tmp" / f"biasaudit-matplotlib-{os.getuid()}"
    )


_DRAW = """
import sys
from biasaudit.render.figures import DotPanel, Series, dot_panels
panel = DotPanel(title="t", xlabel="x", series=[Series("a", [0.1, 0.2], [0.0, 0.1], [0.2, 0.3])])
sys.stdout.buffer.write(dot_panels(["one", "two"], [panel], simulated=True))
"""


def test_a_users_matplotlibrc_does_not_change_the_figures(tmp_path: Path) -> None:
    style = tmp_path / "matplotlibrc"
    style.write_text(
        "axes.facecolor: black\nlines.linewidth: 9\nfont.family: NoSuchFontAnywhere\n",
        encoding="utf-8",
    )
    drawn = []
    for extra in ({}, {"MATPLOTLIBRC": str(style)}):
        env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl"), **extra}
        done = subprocess.run(
            [sys.executable, "-c", _DRAW], env=env, capture_output=True, timeout=120
        )
        assert done.returncode == 0 and not done.stderr, done.stderr.decode()[-2000:]
        drawn.append(done.stdout)
    assert drawn[0][:8] == b"\x89PNG\r\n\x1a\n" and drawn[0] == drawn[1]
