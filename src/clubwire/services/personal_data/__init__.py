"""Members' personal data: erasing a member (``erasures``) and payloads kept only as long as a
club wants (``expiry``); issue 34, ADR 0016."""
