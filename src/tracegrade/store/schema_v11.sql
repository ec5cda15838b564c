-- Schema version 11: traces.error_spans, how many of a trace's spans have status ERROR.
--
-- A trace's status is its root span's: a tool that failed inside a run that recovered leaves the trace OK.
-- The trace list's "some span failed" filter reads this count instead of scanning spans for every page.
-- Trajectory builds fill it; the traces already built get theirs from their stored spans.

ALTER TABLE traces ADD COLUMN IF NOT EXISTS error_spans INTEGER;
UPDATE traces SET error_spans = coalesce(failed.spans, 0)
FROM (
    SELECT t.tenant, t.trace_id, count(s.trace_id) AS spans
    FROM traces t LEFT JOIN spans s ON s.tenant = t.tenant AND s.trace_id = t.trace_id AND s.status_code = 'ERROR'
    GROUP BY t.tenant, t.trace_id
) AS failed
WHERE traces.tenant = failed.tenant AND traces.trace_id = failed.trace_id;
