-- Nsight Compute tables (docs/roofline.md). One row per profiled kernel launch, and one row
-- per (launch, metric[, instance]) with the value in base units (second, byte, byte/second,
-- hz, counts). Created by trace_report.formats.ncu.load_ncu, not on every connection.
CREATE TABLE IF NOT EXISTS ncu_kernels (
    report_id          INTEGER,  -- one per loaded report file
    launch_id          BIGINT,   -- ncu's result "ID" (0-based, in profiling order)
    path               VARCHAR,  -- absolute path of the report as loaded
    sha256             VARCHAR,  -- of the report file
    format             VARCHAR,  -- ncu-rep | csv-details | csv-raw
    kernel             VARCHAR,  -- demangled kernel name ("Kernel Name")
    function           VARCHAR,  -- base function name, without template and parameter lists
    process_id         BIGINT,
    process_name       VARCHAR,
    host               VARCHAR,
    context            BIGINT,
    stream             BIGINT,
    device             BIGINT,   -- CUDA device index
    device_name        VARCHAR,  -- e.g. 'NVIDIA A100 80GB PCIe' (device__attribute_display_name)
    compute_capability VARCHAR,  -- e.g. '8.0'
    block_size         VARCHAR,  -- '(128, 1, 1)'
    grid_size          VARCHAR   -- '(24, 4, 1)'
);

CREATE TABLE IF NOT EXISTS ncu_metrics (
    report_id  INTEGER,
    launch_id  BIGINT,
    section    VARCHAR,  -- section name ('GPU Speed Of Light Throughput'), NULL when unknown
    metric     VARCHAR,  -- ncu metric name (gpu__time_duration.sum); a details-page label that
                         -- has no known metric name is kept as the label
    label      VARCHAR,  -- ncu's display label ('Duration'), when known
    instance   VARCHAR,  -- instanced metrics: the instance key (SASS opcode 'FFMA'), else NULL
    unit       VARCHAR,  -- base unit: second, byte, byte/second, hz, inst, cycle, %, ...
    value      DOUBLE,   -- numeric value in that unit (NULL for text values)
    text       VARCHAR   -- text values (device__attribute_display_name), else NULL
);
