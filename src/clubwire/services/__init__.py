"""Use-cases shared by the web layer, the worker and the CLI."""
