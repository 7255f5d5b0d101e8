"""Rows the test database refuses for real: a trigger that raises, created for one test."""

from __future__ import annotations

from sqlalchemy import Engine


def refuse_attempts(engine: Engine, condition: str) -> None:
    """From now on, inserting an attempt for which ``condition`` (SQL on ``NEW``) holds fails
    with the message ``poisoned``."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.exec_driver_sql(
                f"CREATE TRIGGER poison BEFORE INSERT ON attempts WHEN {condition} "
                "BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
            )
            return
        connection.exec_driver_sql(
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF {condition} THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$"
        )
        connection.exec_driver_sql(
            "CREATE TRIGGER poison BEFORE INSERT ON attempts FOR EACH ROW EXECUTE FUNCTION poison()"
        )
