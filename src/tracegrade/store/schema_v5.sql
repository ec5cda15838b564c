-- Schema version 5: evaluations, one row per gen_ai.evaluation.result event (a log record) received.
--
-- The record itself stays in logs; the store writes its row here in the same transaction
-- (tracegrade/store/evaluations.py reads the attributes), so evaluation results join traces on trace_id.
-- No key: rows are written only for log records the store inserted, which are unique by (tenant, log_key).
-- Events already stored are copied in by the migration (schema.py runs that step after this script).

CREATE TABLE evaluations (
    log_key          VARCHAR NOT NULL,
    trace_id         VARCHAR,
    span_id          VARCHAR,
    time             TIMESTAMP NOT NULL,
    time_ns          BIGINT NOT NULL,
    evaluation_name  VARCHAR,
    score_value      DOUBLE,
    score_label      VARCHAR,
    explanation      VARCHAR,
    error_type       VARCHAR,
    run_id           VARCHAR,
    case_id          VARCHAR,
    service_name     VARCHAR NOT NULL,
    attributes       JSON NOT NULL,
    received_at      TIMESTAMP NOT NULL,
    tenant           VARCHAR NOT NULL         -- the tenant of the log record (see schema_v4.sql)
);
