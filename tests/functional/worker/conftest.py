"""The worker's functional tests: ``hooks``, settings for a worker run in this process that
delivers to the local TLS receivers of ``tests/functional/conftest.py``."""

from __future__ import annotations

import pytest

from clubwire.settings import Settings
from tests.receiver import Authority


@pytest.fixture
def hooks(settings: Settings, tls: Authority) -> Settings:
    """Settings for local receivers: private targets allowed, the test CA trusted, no waiting."""
    return settings.model_copy(
        update={
            "allow_private_targets": True,
            "ca_bundle": tls.bundle,
            "retry_schedule": (0, 0, 0, 0, 0),
            "attempt_timeout": 2.0,
            "connect_timeout": 1.0,
            "lease_seconds": 30.0,
        }
    )
