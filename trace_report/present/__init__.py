"""Presentation: tables (table, CSV, JSON, Markdown), charts, the HTML report and Chrome trace slices."""
