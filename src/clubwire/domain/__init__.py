"""Pure rules: key format, timestamps, programs. Imports nothing else from the package."""
