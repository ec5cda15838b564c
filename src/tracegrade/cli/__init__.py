"""Command-line interface: one module per command, assembled lazily by ``cli.main``."""
