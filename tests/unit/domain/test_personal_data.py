"""Where events keep a person's data, and how it is found, erased and scrubbed."""

from __future__ import annotations

import html
import json
from urllib.parse import quote

import orjson
import pytest

from clubwire import errors
from clubwire.domain import event_catalog, personal_data
from clubwire.domain.personal_data import MARKER, Wanted
from tests.factories import EPOCH, about

NAME = 'Zoë "Z" O\'Neil\\x'
EMAIL = "Zoe@Example.org"


def test_the_persons_are_where_the_payload_models_mark_them() -> None:
    found = {kind: personal_data.person_paths(kind) for kind in event_catalog.KINDS}
    member = ((("member",), frozenset({"name", "email"})),)
    assert found == {
        "registration.created": member,
        "member.updated": member,
        "practice_ice.booked": member,
        "payment.completed": (),
        "game.updated": (),
        "ping": (),
    }


def test_digests_are_per_club_and_blind_to_the_emails_case() -> None:
    data = about("member.updated", id="mbr_1", name=NAME, email=EMAIL)
    mine = personal_data.digests("org_a", "member.updated", data)
    assert mine == set(Wanted(email=EMAIL.upper(), member_id="mbr_1").digests("org_a"))
    assert mine.isdisjoint(personal_data.digests("org_b", "member.updated", data))


@pytest.mark.parametrize(
    ("wanted", "erased"),
    [
        (Wanted(email=EMAIL.lower()), True),
        (Wanted(member_id="mbr_1"), True),
        (Wanted(member_id="mbr_2"), False),
        (Wanted(email="other@example.org"), False),
    ],
)
def test_erase_replaces_only_the_marked_fields_of_a_matching_person(
    wanted: Wanted, erased: bool
) -> None:
    kind = "registration.created"
    data = about(kind, id="mbr_1", name=NAME, email=EMAIL)
    model = event_catalog.validate(kind, data)
    body = event_catalog.envelope("evt_1", kind, EPOCH, "org_a", model)

    done = personal_data.erase("org_a", kind, body, wanted)

    if not erased:
        assert done is None
        return
    assert done is not None
    after, before = orjson.loads(done.body), orjson.loads(body)
    before["data"]["member"].update(name=MARKER, email=MARKER)
    assert after == before
    assert done.values == {NAME, EMAIL}
    assert personal_data.erase("org_a", kind, done.body, wanted) is None


def test_every_spelling_is_scrubbed_in_any_case() -> None:
    texts = [
        NAME,
        json.dumps({"n": NAME})[7:-2],
        orjson.dumps({"n": NAME}).decode(),
        quote(EMAIL),
        EMAIL.upper(),
        "<p>" + html.escape(NAME) + "</p>",
    ]
    found = personal_data.pattern(personal_data.spellings([NAME, EMAIL]))
    for text in texts:
        scrubbed = personal_data.scrub(text, found)
        assert scrubbed is not None
        assert MARKER in scrubbed, text
        assert not personal_data.holds(scrubbed, found)


def test_an_erasure_request_names_someone_by_a_valid_email_or_id() -> None:
    asked = personal_data.erasure_request(EMAIL, None, dry_run=False)
    assert asked.wanted == Wanted(email=EMAIL)
    with pytest.raises(errors.InvalidInput, match="give an email"):
        personal_data.erasure_request(None, None, dry_run=False)
