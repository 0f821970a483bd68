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

CREATE TABLE IF NOT EXISTS events (
    trace_id     INTEGER,
    event_id     BIGINT,   -- 0-based position among the trace's complete events, file order
    cat          VARCHAR,  -- normalised: kernel, cpu_op, cuda_runtime, gpu_memcpy, gpu_memset, ...
    name         VARCHAR,  -- demangled when the trace had an Itanium-mangled (_Z...) name
    pid          VARCHAR,
    tid          VARCHAR,
    ts_us        DOUBLE,
    dur_us       DOUBLE,
    stream       BIGINT,   -- args.stream, or the number in a 2020/2021 tid 'stream 7'
    device       BIGINT,   -- args.device
    correlation  BIGINT,   -- args.correlation (links a GPU activity to its runtime launch)
    external_id  BIGINT,   -- args['External id'] (2020/2021: args['external id'])
    args         VARCHAR   -- JSON text of args, exactly as in the trace
);

CREATE TABLE IF NOT EXISTS kernel_names (
    name         VARCHAR,  -- demangled name as stored in events.name
    raw_name     VARCHAR   -- the name as it appeared in the trace
);
