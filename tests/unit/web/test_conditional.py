"""Entity tags and ``If-None-Match`` (web/conditional.py): RFC 9110 §8.8.3 and §13.1.2."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.web import conditional

TAG = conditional.entity_tag(b'{"data":[]}')
OPAQUE = TAG.strip('"')
ETAGC = st.characters(codec="latin-1").filter(lambda c: c == "!" or "#" <= c <= "~" or c >= "\x80")


def test_the_tag_is_strong_quoted_and_the_start_of_the_bodys_sha256() -> None:
    assert re.fullmatch(r'"[0-9a-f]{32}"', TAG)
    assert hashlib.sha256(b'{"data":[]}').hexdigest()[:32] == OPAQUE


def test_equal_bytes_get_equal_tags_and_other_bytes_another() -> None:
    assert conditional.entity_tag(b'{"data":[]}') == TAG
    assert conditional.entity_tag(b'{"data":[] }') != TAG


@pytest.mark.parametrize(
    "field",
    [
        TAG,
        f"W/{TAG}",
        "*",
        " * ",
        f'"other", {TAG}',
        f'W/"other",W/{TAG}',
        f' ,, "other" ,\t{TAG} , ',
        f'"a,b", {TAG}',  # a comma inside an opaque tag is part of it
    ],
)
def test_a_field_naming_the_tag_or_any_is_not_modified(field: str) -> None:
    assert conditional.none_match(field, TAG)


@pytest.mark.parametrize(
    "field",
    [
        "",
        " ",
        '"stale"',
        'W/"stale", "older"',
        OPAQUE,  # not quoted: not an entity tag
        f"w/{TAG}",  # the weakness indicator is case-sensitive
        f"{TAG[:-1]}",
        f'{TAG}"',
        f"{TAG} junk",  # not a list of entity tags: ignored as a whole
        f'"x" "y", {TAG}',
        f"*, {TAG}",  # "*" stands alone
        f'"{OPAQUE} "',  # a space is not part of any tag
        f"'{OPAQUE}'",
    ],
)
def test_a_field_not_naming_the_tag_is_a_full_answer(field: str) -> None:
    assert not conditional.none_match(field, TAG)


@given(
    others=st.lists(st.text(ETAGC, max_size=40), max_size=5),
    weak=st.lists(st.booleans(), min_size=6, max_size=6),
    position=st.integers(min_value=0, max_value=5),
    space=st.sampled_from(["", " ", "\t", " ,", ", ,"]),
)
def test_any_list_holding_the_tag_matches_weakly_wherever_it_stands(
    others: list[str], weak: list[bool], position: int, space: str
) -> None:
    tags = [f'"{other}"' for other in others if f'"{other}"' != TAG]
    tags.insert(min(position, len(tags)), TAG)
    members = [("W/" if w else "") + tag for w, tag in zip(weak, tags, strict=False)]
    assert conditional.none_match(f",{space}".join(members), TAG)


@given(field=st.text(st.characters(codec="latin-1"), max_size=300))
def test_any_field_is_answered_and_only_names_the_tag_if_it_holds_it(field: str) -> None:
    if conditional.none_match(field, TAG):
        assert OPAQUE in field or field.strip(" \t") == "*"


def test_a_long_hostile_field_is_answered_quickly() -> None:
    field = '"x"' + " ," * 50_000 + "!"
    assert not conditional.none_match(field, TAG)
