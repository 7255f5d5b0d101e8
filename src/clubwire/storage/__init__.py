"""SQLAlchemy models, engine and session setup, and the Alembic migrations."""
