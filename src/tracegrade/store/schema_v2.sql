-- Schema version 2: traces.execution holds the ExecutionResult as zstd-compressed JSON (a BLOB).
--
-- The stored execution ran to several times the size of the trace's own spans (each LLM call's input
-- messages, node responses, the conversation); compressed it is about a fifth as large, which makes
-- the receiver's writes and checkpoints that much lighter. Trajectory rows are derived from the spans,
-- so migrating drops them: the next `tracegrade serve` finds every trace without rows and rebuilds it.

DELETE FROM node_visits;
DELETE FROM tool_calls;
DELETE FROM llm_calls;
DROP TABLE traces;

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
    execution          BLOB NOT NULL,
    updated_at         TIMESTAMP NOT NULL
);
