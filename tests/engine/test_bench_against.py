"""`bench/engine_rankings.py --against REV` says what went wrong in one line, not a trace."""

from __future__ import annotations

import pytest

from bench import engine_rankings


def test_against_a_revision_git_does_not_know_says_so():
    with pytest.raises(SystemExit) as excinfo:
        engine_rankings.compare("no-such-revision-x1", "fixture", 1)
    message = str(excinfo.value.code)
    assert message.startswith("--against no-such-revision-x1: git cannot read it (")
    assert "Traceback" not in message
