"""What the local stack was given, kept across restarts and ``kill -9`` (docs/local-stack.md)."""
