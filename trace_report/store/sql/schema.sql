-- trace-report DuckDB schema (tables). Timestamps and durations in microseconds (DOUBLE),
-- on the trace's own clock. Documented in docs/schema.md; keep it stable.
CREATE TABLE IF NOT EXISTS trace_report_info (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR
);

CREATE TABLE IF NOT EXISTS traces (
    trace_id           INTEGER PRIMARY KEY,
    path               VARCHAR,      -- as given (absolute), or archive!member
    run_id             VARCHAR,      -- folder name of the run (our capture: traces/<run-id>)
    rank               INTEGER,
    rank_source        VARCHAR,      -- distributedInfo | file name | default
    world_size         INTEGER,
    host               VARCHAR,
    device_name        VARCHAR,
    compute_capability VARCHAR,      -- e.g. '8.0'
    torch_version      VARCHAR,      -- from run.json beside the trace, when there is one
    schema_version     VARCHAR,      -- the trace's schemaVersion
    n_events           BIGINT,       -- every entry of traceEvents (any ph)
    n_complete_events  BIGINT,       -- ph = 'X' rows in events
    n_kernels          BIGINT,
    sha256             VARCHAR,      -- of the file as stored (compressed bytes for .gz)
    file_bytes         BIGINT,
    file_mtime_ns      BIGINT,
    metadata           VARCHAR,      -- JSON: every top-level key but traceEvents, secrets redacted
    redacted_keys      VARCHAR[],
    ingested_at        TIMESTAMP
);

-- events (trace_id, event_id, cat, name, pid, tid, ts_us, dur_us, stream, device, correlation,
-- external_id, args) is a TEMP VIEW over Parquet files in the folder beside the database
-- (<db>.events/), listed here, so that traces are decoded and written in parallel.
CREATE TABLE IF NOT EXISTS event_files (
    trace_id  INTEGER,
    file      VARCHAR,   -- relative to the events folder
    rows      BIGINT
);

CREATE TABLE IF NOT EXISTS kernel_names (
    name         VARCHAR,  -- demangled name as stored in events.name
    raw_name     VARCHAR   -- the name as it appeared in the trace
);
