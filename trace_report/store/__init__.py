"""Storage: the ``TraceDB`` handle, the DuckDB database and its views, Parquet pieces, rows kept per trace."""
