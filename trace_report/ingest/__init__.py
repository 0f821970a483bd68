"""Ingest: input files decoded into Parquet pieces and the catalog of a DuckDB database, on an engine."""
