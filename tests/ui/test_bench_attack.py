"""`python -m ui.bench attack` (ui.bench.attack): each attacking link is a new long link (nothing kept to reuse), and
the command refuses an unknown attack by name."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest

from lessons.engine_requests import decode_requests
from ui.bench.attack import _link_query, main


def test_each_attacking_link_is_new_and_long():
    """Two tags give two different request lists, each asking for steps=600 with eight long requests."""
    a, b = (parse_qs(_link_query(tag)) for tag in (1, 2))
    assert a["steps"] == b["steps"] == ["600"] and a["reqs"] != b["reqs"]
    specs = decode_requests(a["reqs"][0])
    assert len(specs) == 8 and all(s.max_tokens == 128 for s in specs)


def test_an_unknown_attack_is_refused_by_name(capsys):
    """--attack floods is not one of links, ledger, sessions: a usage error naming it, no server started."""
    with pytest.raises(SystemExit) as exc:
        main(["--attack", "floods"])
    assert exc.value.code == 2 and "floods" in capsys.readouterr().err
