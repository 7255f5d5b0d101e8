"""The HTTP edge: ``create_app`` builds the whole service."""
