"""The club data API keeps its listings' entity tags (each holding its listing's bytes) for
as many clubs as listings are kept, the most recently used: a serve process over any number
of clubs stays bounded (issue 38 item 6)."""

from __future__ import annotations

from clubwire.web import public_api


def test_tags_are_kept_for_the_kept_number_of_clubs_the_most_recently_used() -> None:
    programs = public_api.Programs(2)
    bodies = {club: b'{"data": ["' + club.encode() + b'"]}' for club in ("a", "b", "c")}
    tags = {club: programs._tag(club, body) for club, body in bodies.items()}
    assert programs._tag("c", bodies["c"]) is tags["c"]  # kept
    assert programs._tag("b", bodies["b"]) is tags["b"]
    assert programs._tag("a", bodies["a"]) is not tags["a"]  # forgotten, tagged again
    assert programs._tag("a", bodies["a"]).tag == tags["a"].tag
