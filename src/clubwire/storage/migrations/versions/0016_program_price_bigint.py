"""programs.price_cents as a 64-bit integer: every price the API accepts fits on both databases

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

The API takes prices up to 99,999,999.99, stored as whole cents: up to 9,999,999,999, past
the 2,147,483,647 a PostgreSQL ``integer`` holds (a price of 21,474,836.48 or more answered
500 there, while SQLite, whose integers are 64-bit, stored it). ``bigint`` holds them all. On
SQLite the table is rebuilt with the new declared type; nothing refers to ``programs``, so
nothing else goes with it.

Down again, a price too large for ``integer`` is refused by name before anything changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_INTEGER_MAX = 2**31 - 1


def upgrade() -> None:
    _price_cents(sa.Integer(), sa.BigInteger())


def downgrade() -> None:
    too_large = op.get_bind().scalar(
        sa.text("SELECT count(*) FROM programs WHERE price_cents > :most"),
        {"most": _INTEGER_MAX},
    )
    if too_large:
        raise RuntimeError(
            f"{too_large} program(s) cost 21,474,836.48 or more, which 0015's integer "
            "price_cents cannot hold: change their prices before downgrading."
        )
    _price_cents(sa.BigInteger(), sa.Integer())


def _price_cents(was: sa.types.TypeEngine[int], becomes: sa.types.TypeEngine[int]) -> None:
    with op.batch_alter_table("programs", schema=None) as batch_op:
        batch_op.alter_column("price_cents", existing_type=was, type_=becomes, nullable=False)
