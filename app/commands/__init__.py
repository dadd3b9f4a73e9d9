"""One module per ``ingest`` subcommand, named for it; each declares ``COMMAND``.

The list and its --help order are :data:`app.cli.COMMANDS`.
"""
