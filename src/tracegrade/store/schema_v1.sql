-- tracegrade trace store, schema version 1. Every table and column is documented in SCHEMA.md.
-- Times: *_ns are Unix nanoseconds (exact, as received); *_time are the same instants as UTC TIMESTAMP
-- (microsecond precision) for humans and date functions. Ids are lower-case hex strings.

CREATE TABLE spans (
    trace_id                 VARCHAR NOT NULL,
    span_id                  VARCHAR NOT NULL,
    parent_span_id           VARCHAR,
    name                     VARCHAR NOT NULL,
    kind                     VARCHAR NOT NULL,
    service_name             VARCHAR NOT NULL,
    scope_name               VARCHAR NOT NULL,
    scope_version            VARCHAR NOT NULL,
    start_time               TIMESTAMP NOT NULL,
    end_time                 TIMESTAMP NOT NULL,
    start_ns                 BIGINT NOT NULL,
    end_ns                   BIGINT NOT NULL,
    duration_ms              DOUBLE NOT NULL,
    status_code              VARCHAR NOT NULL,
    status_message           VARCHAR NOT NULL,
    attributes               JSON NOT NULL,
    events                   JSON NOT NULL,
    links                    JSON NOT NULL,
    resource                 JSON NOT NULL,
    trace_state              VARCHAR NOT NULL,
    flags                    BIGINT NOT NULL,
    dropped_attributes_count INTEGER NOT NULL,
    dropped_events_count     INTEGER NOT NULL,
    dropped_links_count      INTEGER NOT NULL,
    received_at              TIMESTAMP NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX spans_trace_id ON spans (trace_id);

CREATE TABLE logs (
    log_key                  VARCHAR NOT NULL PRIMARY KEY,
    trace_id                 VARCHAR,
    span_id                  VARCHAR,
    time                     TIMESTAMP NOT NULL,
    time_ns                  BIGINT NOT NULL,
    observed_time_ns         BIGINT NOT NULL,
    event_name               VARCHAR NOT NULL,
    severity_number          INTEGER NOT NULL,
    severity_text            VARCHAR NOT NULL,
    body                     JSON,
    attributes               JSON NOT NULL,
    resource                 JSON NOT NULL,
    service_name             VARCHAR NOT NULL,
    scope_name               VARCHAR NOT NULL,
    flags                    BIGINT NOT NULL,
    dropped_attributes_count INTEGER NOT NULL,
    received_at              TIMESTAMP NOT NULL
);
CREATE INDEX logs_trace_id ON logs (trace_id);

CREATE TABLE traces (
    trace_id           VARCHAR NOT NULL PRIMARY KEY,
    root_name          VARCHAR,
    service_name       VARCHAR,
    start_time         TIMESTAMP,
    end_time           TIMESTAMP,
    duration_ms        DOUBLE,
    status             VARCHAR NOT NULL,
    error              VARCHAR,
    convention         VARCHAR,
    user_query         VARCHAR,
    final_response     VARCHAR,
    response_captured  BOOLEAN NOT NULL,
    content_captured   BOOLEAN NOT NULL,
    span_count         INTEGER NOT NULL,
    llm_calls          INTEGER NOT NULL,
    tool_calls         INTEGER NOT NULL,
    node_visits        INTEGER NOT NULL,
    input_tokens       BIGINT NOT NULL,
    output_tokens      BIGINT NOT NULL,
    total_tokens       BIGINT NOT NULL,
    eval_set_id        VARCHAR,
    case_id            VARCHAR,
    turn_index         INTEGER,
    run_id             VARCHAR,
    conversation_id    VARCHAR,
    dropped_attributes BIGINT NOT NULL,
    mapping_issues     JSON NOT NULL,
    execution          JSON NOT NULL,
    updated_at         TIMESTAMP NOT NULL
);

CREATE TABLE node_visits (
    trace_id       VARCHAR NOT NULL,
    seq            INTEGER NOT NULL,
    name           VARCHAR NOT NULL,
    span_id        VARCHAR,
    parent_name    VARCHAR,
    parallel_group INTEGER,
    step           INTEGER,
    start_time     TIMESTAMP,
    duration_ms    DOUBLE,
    status         VARCHAR NOT NULL
);
CREATE INDEX node_visits_trace_id ON node_visits (trace_id);

CREATE TABLE tool_calls (
    trace_id        VARCHAR NOT NULL,
    seq             INTEGER NOT NULL,
    name            VARCHAR NOT NULL,
    call_id         VARCHAR,
    arguments       JSON,
    result          JSON,
    args_captured   BOOLEAN NOT NULL,
    result_captured BOOLEAN NOT NULL,
    error           VARCHAR,
    duration_ms     DOUBLE,
    span_id         VARCHAR
);
CREATE INDEX tool_calls_trace_id ON tool_calls (trace_id);

CREATE TABLE llm_calls (
    trace_id         VARCHAR NOT NULL,
    seq              INTEGER NOT NULL,
    model            VARCHAR,
    provider         VARCHAR,
    node             VARCHAR,
    input_tokens     BIGINT NOT NULL,
    output_tokens    BIGINT NOT NULL,
    total_tokens     BIGINT NOT NULL,
    output_text      VARCHAR,
    content_captured BOOLEAN NOT NULL,
    finish_reason    VARCHAR,
    error            VARCHAR,
    span_id          VARCHAR,
    start_time       TIMESTAMP,
    duration_ms      DOUBLE
);
CREATE INDEX llm_calls_trace_id ON llm_calls (trace_id);
