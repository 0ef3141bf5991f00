-- What a model worker filling its slots reads (workers/ramped-slots.ts, db/queue.ts readBacklog): how many
-- predictions wait for a version, and the median service time of its last 16 successes in the last hour.
-- SECURITY DEFINER: the engine's role may not read predictions' versions, statuses or metrics row by row,
-- only these two figures.
CREATE OR REPLACE FUNCTION kiln_version_backlog(p_version_id text)
RETURNS TABLE (waiting integer, service_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = public
AS $$
  SELECT (SELECT count(*)::int FROM predictions WHERE version_id = p_version_id AND status = 'starting'),
         (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s)
            FROM (SELECT (metrics->>'predict_time')::float8 AS s FROM predictions
                   WHERE version_id = p_version_id AND status = 'succeeded' AND completed_at > now() - interval '1 hour'
                     AND metrics ? 'predict_time'
                   ORDER BY completed_at DESC LIMIT 16) recent)
$$;
