"""The command line (``trace-report``): one module per command on one Typer app, imported when it runs."""
