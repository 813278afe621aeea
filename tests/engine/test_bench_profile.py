"""`bench/engine_profile.py` names the request it does not know, and its profile names the
engine's own functions."""

from __future__ import annotations

import pytest

from bench import engine_profile


def test_an_unknown_request_is_named_with_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        engine_profile.main(["no such request"])
    err = capsys.readouterr().err
    assert "unknown request 'no such request'" in err
    assert "7B QLoRA" in err


def test_the_profile_shows_where_the_estimate_spends_its_time(capsys):
    engine_profile.sample("7B inference bf16", 0.2, 50)
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("7B inference bf16: ")
    assert "--- inclusive" in out
    assert "--- self" in out
    assert "assemble.py:estimate" in out
