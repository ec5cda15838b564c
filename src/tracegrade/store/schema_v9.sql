-- Schema version 9: traces.lean_execution, the execution without its LLM content (zstd-compressed JSON, a BLOB).
--
-- Offline grading with criteria that read no LLM content (tool calls, node visits, the response…) reads
-- this instead of traces.execution (on agent traces most of that is LLM content), with the agent's token usage.
-- Rows built before version 9 have NULL here: offline grading reads their whole execution instead.

ALTER TABLE traces ADD COLUMN IF NOT EXISTS lean_execution BLOB;
