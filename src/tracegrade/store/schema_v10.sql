-- Schema version 10: forgotten_traces, the traces deleted on request (TraceStore.forget).
--
-- A row says that every record of (tenant, trace_id) was deleted and that the store drops any written
-- later: spans still in an exporter's retry, a receiver's queue or its request journal never bring the
-- trace back.

CREATE TABLE IF NOT EXISTS forgotten_traces (
    tenant       VARCHAR NOT NULL,
    trace_id     VARCHAR NOT NULL,
    forgotten_at TIMESTAMP NOT NULL,
    PRIMARY KEY (tenant, trace_id)
);
