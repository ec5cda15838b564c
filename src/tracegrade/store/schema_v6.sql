-- Schema version 6: traces.tool_names, the distinct names of the tools a trace called.
--
-- The web UI's and MCP's tool filter reads it (list_contains) instead of joining traces with tool_calls on
-- 32-character trace ids: about a third of the CPU time at 1,000,000 spans (bench/RESULTS.md, web UI).
-- Trajectory builds fill it; the traces already built get theirs from their tool_calls rows.

ALTER TABLE traces ADD COLUMN tool_names VARCHAR[];
UPDATE traces SET tool_names = called.names
FROM (SELECT tenant, trace_id, list(DISTINCT name ORDER BY name) AS names FROM tool_calls GROUP BY tenant, trace_id) AS called
WHERE traces.tenant = called.tenant AND traces.trace_id = called.trace_id;
UPDATE traces SET tool_names = [] WHERE tool_names IS NULL;
