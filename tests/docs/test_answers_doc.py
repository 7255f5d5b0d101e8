"""docs/receiving-webhooks.md's "What your answer makes clubwire do" says what the code does:
where it stands in the guide, the ``Retry-After`` values it quotes read as it says, the words
staff see, and its ``clubwire listen`` lines are ones the command takes, each value as valid
or not as its comment says."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from clubwire.cli import cli
from clubwire.domain import delivering, retry_after
from clubwire.web.ui import templating
from tests.docs import markdown

DOC = markdown.DOCS / "receiving-webhooks.md"
SECTION = "## What your answer makes clubwire do"
# The guide's example delivery was published then (``createdAt`` under "What arrives").
PUBLISHED = datetime(2026, 1, 13, 18, 30, tzinfo=UTC)
MOST = timedelta(hours=12)  # "at most 12 hours after your answer"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return SECTION + text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _listens() -> list[tuple[list[str], str]]:
    """Each ``clubwire listen`` line of the section's console block: its arguments after
    ``listen``, the secret's placeholder filled in, and its comment."""
    (block,) = re.findall(r"```console\n(.*?)```", _section(), re.S)
    found = []
    for line in block.splitlines():
        command, _, comment = line.partition("   #")
        _, _, verb, *args = command.split()
        if verb == "listen":
            found.append(([arg.replace("whsec_…", "whsec_x") for arg in args], comment))
    return found


def test_the_section_follows_answer_2xx_fast_and_comes_before_retries() -> None:
    headings = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line[:3] == "## "]
    at = headings.index(SECTION)
    assert headings[at - 1 : at + 2] == [
        "## Answer 2xx, fast",
        SECTION,
        "## Retries, dead, dead in a row, skipped",
    ]


def test_the_values_it_quotes_ask_for_what_it_says() -> None:
    quoted = re.findall(r"`Retry-After: ([^`]+)`", _section())
    seconds, date, too_short = quoted
    assert retry_after.asked(seconds, PUBLISHED, MOST) == PUBLISHED + timedelta(seconds=120)
    asked = retry_after.asked(date, PUBLISHED, MOST)
    assert asked == PUBLISHED + timedelta(minutes=30)
    assert f'"{delivering.ASKED} {templating.human_time(asked)}"' in " ".join(_section().split())
    # "Retry-After: 10 after a first failure still waits the minute of the schedule"
    job = delivering.Job(
        "dlv_1",
        "org_1",
        "we_1",
        "ping",
        "",
        "",
        b"",
        delivering.Status.PENDING,
        0,
        delivering.Trigger.SCHEDULED,
        PUBLISHED,
    )
    ten = retry_after.asked(too_short, PUBLISHED, MOST)
    verdict = delivering.judge(
        job, False, PUBLISHED, delivering.RetrySchedule(), 0, code=503, asked=ten
    )
    assert (verdict.next_attempt_at, verdict.asked) == (PUBLISHED + timedelta(minutes=1), False)


@pytest.mark.parametrize(("args", "comment"), _listens(), ids=str)
def test_each_listen_line_is_one_the_command_takes_saying_what_comes_of_it(
    args: list[str], comment: str
) -> None:
    command = cli.commands["listen"]
    with command.make_context("listen", args) as context:
        given = context.params["retry_after"]
    valid = given is None or retry_after.asked(given, PUBLISHED, MOST) is not None
    assert valid == ("not valid" not in comment)
