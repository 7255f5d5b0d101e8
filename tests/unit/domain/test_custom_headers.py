"""Unit tests for an endpoint's headers of its own: what may be given, why the rest is refused
(never quoting a value), how a change applies, and that ours win."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import custom_headers
from clubwire.domain.custom_headers import BadHeader, BadName, BadValue, Header

SECRET = "s3cr3t-value"
MARK = "Zq9"  # begins every value whose message is read
ODD_NAME = "x!#$%&'*+-.^_`|~9"  # every character a name may hold but letters
ODD_VALUE = '~!"#(),/:;<=>?@[\\]{}'  # and a value
TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
names = st.text(TCHARS, min_size=1, max_size=custom_headers.NAME_LIMIT).filter(
    lambda n: custom_headers.reason_reserved(n) is None
)
words = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=50)
values = st.lists(words, min_size=1, max_size=20).map(" ".join)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("X-Api-Key: abc", Header("X-Api-Key", "abc")),
        ("X-Api-Key:abc", Header("X-Api-Key", "abc")),
        ("  Authorization :\tBearer abc.def  ", Header("Authorization", "Bearer abc.def")),
        ("Cookie: session=a:b", Header("Cookie", "session=a:b")),
        (f"{ODD_NAME}: {ODD_VALUE}", Header(ODD_NAME, ODD_VALUE)),
    ],
)
def test_parse_reads_name_and_value_as_http_does(line: str, expected: Header) -> None:
    assert custom_headers.parse(line) == expected


@pytest.mark.parametrize(
    "name",
    [
        "Host", "content-type", "CONTENT-LENGTH", "Content-Encoding", "Transfer-Encoding",
        "Connection", "user-agent", "Accept-Encoding", "X-Service-Signature", "x-service-anything",
        "webhook-id", "Webhook-Signature", "Keep-Alive", "Proxy-Authenticate",
        "Proxy-Authorization", "TE", "Trailer", "Upgrade", "Proxy-Connection", "Expect",
        "traceparent", "TraceState",
    ],
)  # fmt: skip
def test_reserved_names_are_refused_in_any_case_saying_why(name: str) -> None:
    with pytest.raises(BadName) as caught:
        custom_headers.parse(f"{name}: {SECRET}")
    message = str(caught.value)
    assert message.startswith(f"{name} cannot be one of an endpoint's headers: ")
    assert SECRET not in message


@pytest.mark.parametrize("name", ["Authorization", "Cookie", "X-Api-Key", "Accept", "Webhook"])
def test_names_no_one_else_sets_are_allowed(name: str) -> None:
    assert custom_headers.parse(f"{name}: v") == Header(name, "v")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (SECRET, "A header is written Name: value, with a colon after its name."),
        (f": {SECRET}", "A header's name is empty: give one, such as X-Api-Key."),
        (f"X Api: {SECRET}", "A header's name holds a space, which HTTP does not allow"),
        (f"X-Api\r\nHost: {SECRET}", "A header's name holds the character U+000D,"),
        (f"X-Api\x00: {SECRET}", "A header's name holds the character U+0000,"),
        (f"X\u2010Api: {SECRET}", "A header's name holds the character U+2010,"),  # a hyphen
        (f"Х-Api: {SECRET}", "A header's name holds the character U+0425,"),  # Cyrillic Ha
        (f"{'X' * 10_000}: {SECRET}", "A header's name has 10000 characters: at most 100."),
    ],
)  # fmt: skip
def test_bad_names_are_refused_without_quoting_what_was_typed(line: str, message: str) -> None:
    with pytest.raises(BadHeader) as caught:
        custom_headers.parse(line)
    assert str(caught.value).startswith(message)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("", "is empty: give 1 to 1000 characters."),
        ("   ", "is empty: give 1 to 1000 characters."),
        (SECRET * 1000, "has 12000 characters: at most 1000."),
        (f"{SECRET}\r\nX-Evil: 1", "holds a line break: it must be visible ASCII"),
        (f"{SECRET}\n", "holds a line break"),  # inside: only spaces and tabs are stripped
        (f"{SECRET}\x00", "holds a control character (a tab, NUL or DEL)"),
        (f"{SECRET}\tx", "holds a control character (a tab, NUL or DEL)"),
        (f"{SECRET}\x7f", "holds a control character (a tab, NUL or DEL)"),
        (f"{SECRET}é", "holds a character that is not ASCII"),
        (f"{SECRET}\u00a0x", "holds a character that is not ASCII"),  # a no-break space
        (f"Bearer\uff1a{SECRET}", "holds a character that is not ASCII"),  # a full-width colon
        (f"{SECRET}\udcff", "holds a character that is not ASCII"),  # an undecodable byte
        (f"Bearer  {SECRET}", "holds two spaces in a row"),
    ],
)
def test_bad_values_are_refused_never_quoted(typed: str, why: str) -> None:
    with pytest.raises(BadValue) as caught:
        custom_headers.header("X-Api-Key", typed)
    assert str(caught.value).startswith(f"The value of X-Api-Key {why}")
    assert SECRET not in str(caught.value)


def test_a_value_of_exactly_the_limit_is_kept() -> None:
    longest = "v" * custom_headers.VALUE_LIMIT
    assert custom_headers.header("X-Api-Key", f" {longest}\t") == Header("X-Api-Key", longest)


SAVED = (Header("X-Api-Key", "old"), Header("X-Team", "t"))


def test_a_change_replaces_by_name_in_place_and_adds_after() -> None:
    done = custom_headers.changed(SAVED, [Header("x-api-key", "new"), Header("Authorization", "a")])
    assert done == (Header("x-api-key", "new"), Header("X-Team", "t"), Header("Authorization", "a"))


def test_a_change_removes_by_name_in_any_case_before_it_sets() -> None:
    assert custom_headers.changed(SAVED, [], ["x-team"]) == (Header("X-Api-Key", "old"),)
    both = custom_headers.changed(SAVED, [Header("X-Team", "u")], ["X-TEAM"])
    assert both == (Header("X-Api-Key", "old"), Header("X-Team", "u"))


def test_removing_a_header_that_is_not_there_says_so() -> None:
    with pytest.raises(BadName, match=r"^X-Other is not one of this endpoint's headers\.$"):
        custom_headers.changed(SAVED, [], ["X-Other"])


def test_a_name_given_twice_is_refused() -> None:
    twice = [Header("X-A", "1"), Header("x-a", "2")]
    with pytest.raises(BadName, match=r"^x-a is given twice: give each header once\.$"):
        custom_headers.changed((), twice)


def test_a_change_checks_what_it_is_given_again() -> None:
    with pytest.raises(BadName, match=r"^Host cannot be"):
        custom_headers.changed((), [Header("Host", "evil.example")])
    with pytest.raises(BadValue, match="line break"):
        custom_headers.changed((), [Header("X-A", "a\r\nb")])


def test_ten_headers_at_most_counting_the_result() -> None:
    ten = [Header(f"X-{i}", "v") for i in range(custom_headers.MAX_HEADERS)]
    assert len(custom_headers.changed((), ten)) == 10
    assert len(custom_headers.changed(ten, [Header("X-11", "v")], ["X-0"])) == 10
    assert custom_headers.changed(ten, [Header("x-3", "w")])[3] == Header("x-3", "w")
    with pytest.raises(BadHeader) as caught:
        custom_headers.changed(ten, [Header("X-11", "v")])
    assert str(caught.value) == (
        "An endpoint has at most 10 headers of its own, and this would make 11: remove one first."
    )


def test_the_document_keeps_names_values_and_order() -> None:
    headers = (Header("X-B", 'a "quoted" \\ value'), Header("Authorization", "Bearer x"))
    document = custom_headers.dumps(headers)
    assert document == '[["X-B","a \\"quoted\\" \\\\ value"],["Authorization","Bearer x"]]'
    assert custom_headers.loads(document) == headers
    assert custom_headers.loads(custom_headers.dumps(())) == ()


def test_a_saved_header_shows_masked() -> None:
    assert custom_headers.masked(Header("X-Api-Key", SECRET)) == "X-Api-Key: ••••••••"


def test_ours_win_whatever_the_case() -> None:
    ours = {"Content-Type": "application/json", "X-Service-Event": "ping"}
    theirs = [
        Header("content-type", "text/plain"),
        Header("X-SERVICE-EVENT", "forged"),
        Header("Host", "evil.example"),
        Header("X-Api-Key", "k"),
    ]
    assert custom_headers.beside(ours, theirs) == {"X-Api-Key": "k", **ours}


@given(st.text())
def test_any_text_is_a_header_or_refused_with_the_domains_error(line: str) -> None:
    try:
        found = custom_headers.parse(line)
    except BadHeader:
        return
    assert custom_headers.parse(f"{found.name}: {found.value}") == found


@given(st.text().filter(lambda n: MARK not in n), st.text())
def test_any_two_fields_are_a_header_or_refused_without_the_value(name: str, rest: str) -> None:
    try:
        found = custom_headers.header(name, MARK + rest)
    except BadHeader as refused:
        message = str(refused)
    else:
        message = ""
        assert found.value.isascii()
        assert found.value.isprintable()
    assert MARK not in message


@given(names, values)
def test_every_valid_header_reads_back_from_its_line(name: str, value: str) -> None:
    assert custom_headers.parse(f"{name}: {value}") == Header(name, value)


@given(st.lists(st.tuples(names, values), max_size=custom_headers.MAX_HEADERS))
def test_every_valid_set_round_trips_through_its_document(pairs: list[tuple[str, str]]) -> None:
    headers = tuple(Header(name, value) for name, value in pairs)
    assert custom_headers.loads(custom_headers.dumps(headers)) == headers


@given(st.lists(st.text(), max_size=3))
def test_any_names_to_remove_change_the_set_or_are_refused_with_the_domains_error(
    removed: list[str],
) -> None:
    try:
        done = custom_headers.changed(SAVED, [], removed)
    except BadHeader:
        return
    assert set(done) <= set(SAVED)
