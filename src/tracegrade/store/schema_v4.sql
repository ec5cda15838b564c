-- Schema version 4: every row carries its tenant (the tenant whose bearer token sent it; see tenancy.py).
--
-- Rows stored before belong to the one tenant a receiver without a tokens file has, 'default'. Keys lead
-- with the tenant: two tenants may send the same trace id (or the same log record), and each keeps its own
-- rows and its own trajectory. A table with a key is copied, since DuckDB cannot change a primary key in
-- place; the others gain the column. No default remains: a write that names no tenant fails.

ALTER TABLE spans ADD COLUMN tenant VARCHAR DEFAULT 'default';
ALTER TABLE spans ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE spans ALTER COLUMN tenant SET NOT NULL;

CREATE TABLE logs_v4 (
    log_key                  VARCHAR NOT NULL,
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
    received_at              TIMESTAMP NOT NULL,
    tenant                   VARCHAR NOT NULL,
    PRIMARY KEY (tenant, log_key)
);
INSERT INTO logs_v4 SELECT *, 'default' FROM logs ORDER BY received_at, log_key;
DROP INDEX logs_trace_id;
DROP TABLE logs;
ALTER TABLE logs_v4 RENAME TO logs;
CREATE INDEX logs_trace_id ON logs (trace_id);

CREATE TABLE traces_v4 (
    trace_id           VARCHAR NOT NULL,
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
    execution          BLOB NOT NULL,
    updated_at         TIMESTAMP NOT NULL,
    tenant             VARCHAR NOT NULL,
    PRIMARY KEY (tenant, trace_id)
);
INSERT INTO traces_v4 SELECT *, 'default' FROM traces ORDER BY updated_at, trace_id;
DROP TABLE traces;
ALTER TABLE traces_v4 RENAME TO traces;

DROP INDEX node_visits_trace_id;
ALTER TABLE node_visits ADD COLUMN tenant VARCHAR DEFAULT 'default';
ALTER TABLE node_visits ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE node_visits ALTER COLUMN tenant SET NOT NULL;
CREATE INDEX node_visits_trace_id ON node_visits (trace_id);

DROP INDEX tool_calls_trace_id;
ALTER TABLE tool_calls ADD COLUMN tenant VARCHAR DEFAULT 'default';
ALTER TABLE tool_calls ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE tool_calls ALTER COLUMN tenant SET NOT NULL;
CREATE INDEX tool_calls_trace_id ON tool_calls (trace_id);

DROP INDEX llm_calls_trace_id;
ALTER TABLE llm_calls ADD COLUMN tenant VARCHAR DEFAULT 'default';
ALTER TABLE llm_calls ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE llm_calls ALTER COLUMN tenant SET NOT NULL;
CREATE INDEX llm_calls_trace_id ON llm_calls (trace_id);
