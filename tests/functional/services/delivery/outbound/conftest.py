"""The ``tls`` fixture of the outbound tests: a trustme CA, a server context and a CA bundle.

Inside this package it stands for the functional ring's own ``tls`` (a
``tests.receiver.Authority``, from ``tests/functional/conftest.py``), and nowhere else.
"""

from __future__ import annotations

import pytest
import trustme

from tests.functional.services.delivery.outbound.harness import Tls, server_context


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "hook.example", "127.0.0.1", "::1", "::ffff:127.0.0.1")
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return Tls(ca, server_context(cert), path)
