-- Schema version 13: traces.mapper_revision, the revision of the trajectory mapper that built each trace's rows.
--
-- When the mapper changes what it derives from the same spans (version 13 came with calls made inside another
-- tool call marked `within_tool`), the trajectories stored before keep the old derivation until they are
-- rebuilt. The column tells them apart: NULL (every row built before this version) or a number below the
-- mapper's `MAPPER_REVISION` is out of date, and `tracegrade rebuild` maps those traces again.

ALTER TABLE traces ADD COLUMN IF NOT EXISTS mapper_revision INTEGER;
