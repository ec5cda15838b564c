-- Schema version 3: the spans table without its PRIMARY KEY and trace_id index.
--
-- Both are ART indexes, which DuckDB keeps in memory and updates on every insert: together they cost
-- about as much of the writer's time as the rest of the insert (bench/RESULTS.md, store writes), and
-- their memory grows with the store. The writer keeps (trace_id,
-- span_id) unique itself (see TraceStore._insert_spans), and reads by trace do not use the index:
-- fetching a trace's rows costs more than finding them, so reads narrow by rowid instead.
-- DuckDB cannot drop a primary key in place, so the table is copied.

CREATE TABLE spans_v3 (
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
    received_at              TIMESTAMP NOT NULL
);
INSERT INTO spans_v3 SELECT * FROM spans ORDER BY received_at, trace_id, span_id;
DROP INDEX spans_trace_id;
DROP TABLE spans;
ALTER TABLE spans_v3 RENAME TO spans;
