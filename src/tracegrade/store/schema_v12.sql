-- Schema version 12: the rest of each span's and log record's OTLP envelope, so an export gives it back whole.
--
-- Version 1 kept the resource's attributes and the instrumentation scope's name (and, for spans, version);
-- an export then lost the resource's and the scope's schema URLs, the scope's attributes and their dropped
-- attribute counts (and a log record's scope version). A batch shares a few resources and scopes, so each
-- column holds a handful of distinct values that DuckDB's dictionary and constant compression store once
-- per row group. Rows stored before read the defaults: empty text, no attributes, nothing dropped.
-- (DuckDB adds no column with a NOT NULL constraint, and logs' index forbids adding one later: the columns
-- are nullable, every write gives them a value.)

ALTER TABLE spans ADD COLUMN IF NOT EXISTS resource_schema_url VARCHAR DEFAULT '';
ALTER TABLE spans ADD COLUMN IF NOT EXISTS resource_dropped_attributes_count INTEGER DEFAULT 0;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS scope_attributes JSON DEFAULT '{}';
ALTER TABLE spans ADD COLUMN IF NOT EXISTS scope_schema_url VARCHAR DEFAULT '';
ALTER TABLE spans ADD COLUMN IF NOT EXISTS scope_dropped_attributes_count INTEGER DEFAULT 0;

ALTER TABLE logs ADD COLUMN IF NOT EXISTS scope_version VARCHAR DEFAULT '';
ALTER TABLE logs ADD COLUMN IF NOT EXISTS resource_schema_url VARCHAR DEFAULT '';
ALTER TABLE logs ADD COLUMN IF NOT EXISTS resource_dropped_attributes_count INTEGER DEFAULT 0;
ALTER TABLE logs ADD COLUMN IF NOT EXISTS scope_attributes JSON DEFAULT '{}';
ALTER TABLE logs ADD COLUMN IF NOT EXISTS scope_schema_url VARCHAR DEFAULT '';
ALTER TABLE logs ADD COLUMN IF NOT EXISTS scope_dropped_attributes_count INTEGER DEFAULT 0;
