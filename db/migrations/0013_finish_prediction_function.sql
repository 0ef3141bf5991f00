-- The hot path's last write (activities/engine.ts projectSucceeded, db/predictions.ts finishPrediction) in one round
-- trip: the final row under the revision rule, the account's admission slot released, usage recorded, and the stream's
-- logs, output (unless streamed) and done events, as writePredictionSnapshot's transaction does them with `existing`.
-- Returns 'written', 'stale' (a newer revision is there), 'missing' (no row), or 'other-run' (a reset's run wrote
-- the row: the caller takes writePredictionSnapshot's path, which asks Temporal which run is current).
CREATE OR REPLACE FUNCTION kiln_finish_prediction(p_id text, p_run_id text, p_row jsonb, p_usage jsonb, p_output_text text)
RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_before record;
  v_revision integer := (p_row->>'revision')::integer;
  v_logs text := p_row->>'logs';
  v_new_logs text;
BEGIN
  SELECT logs, revision, run_id, retries INTO v_before FROM predictions WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'missing';
  END IF;
  IF p_run_id IS NOT NULL AND v_before.run_id IS NOT NULL AND v_before.run_id <> p_run_id THEN
    RETURN 'other-run';
  END IF;
  IF v_before.revision > v_revision THEN
    RETURN 'stale';
  END IF;
  UPDATE predictions SET
    output = p_row->'output',
    logs = v_logs,
    error = p_row->>'error',
    status = p_row->>'status',
    metrics = p_row->'metrics',
    started_at = (p_row->>'started_at')::timestamptz,
    completed_at = (p_row->>'completed_at')::timestamptz,
    revision = v_revision,
    run_id = coalesce(p_run_id, v_before.run_id)
  WHERE id = p_id;
  DELETE FROM admissions WHERE prediction_id = p_id;
  INSERT INTO usage_records (prediction_id, retries, account_id, model, version_id, task, status, hardware,
      predict_seconds, input_tokens, cached_tokens, output_tokens, images)
    VALUES (p_id, v_before.retries, p_usage->>'account_id', p_usage->>'model', p_usage->>'version_id', p_usage->>'task',
      p_usage->>'status', p_usage->>'hardware', (p_usage->>'predict_seconds')::real, (p_usage->>'input_tokens')::integer,
      (p_usage->>'cached_tokens')::integer, (p_usage->>'output_tokens')::integer, (p_usage->>'images')::integer)
    ON CONFLICT DO NOTHING;
  -- The same revision again: its events are in the stream already.
  IF v_before.revision = v_revision THEN
    RETURN 'written';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext(p_id));
  v_new_logs := CASE WHEN starts_with(v_logs, v_before.logs) THEN substr(v_logs, length(v_before.logs) + 1) ELSE v_logs END;
  IF v_new_logs <> '' THEN
    INSERT INTO prediction_events (prediction_id, event, data) VALUES (p_id, 'logs', regexp_replace(v_new_logs, E'\n$', ''));
  END IF;
  IF p_output_text IS NOT NULL AND NOT EXISTS (SELECT 1 FROM prediction_events WHERE prediction_id = p_id AND event = 'output') THEN
    INSERT INTO prediction_events (prediction_id, event, data) VALUES (p_id, 'output', p_output_text);
  END IF;
  INSERT INTO prediction_events (prediction_id, event, data) VALUES (p_id, 'done', '{}');
  PERFORM pg_notify('kiln_prediction_events', p_id);
  RETURN 'written';
END
$$;
