-- One output chunk of an engine attempt in one round trip (db/events.ts appendOutput): the stream's lock, the attempt
-- fence and the insert, each statement with a snapshot taken after the lock (a volatile function's statements take
-- their own), as the separate statements of a transaction did. NULL: a later attempt writes the stream now. The
-- notification says that only output came (db/events.ts parseNotice): a wait for the end need not look.
CREATE OR REPLACE FUNCTION kiln_append_output(p_prediction_id text, p_data text, p_attempt integer, p_tokens integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_current integer;
  v_id bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(p_prediction_id));
  SELECT attempt INTO v_current FROM prediction_events
    WHERE prediction_id = p_prediction_id AND event IN ('output', 'reset', 'attempt')
    ORDER BY id DESC LIMIT 1;
  IF coalesce(v_current, 0) > p_attempt THEN
    RETURN NULL;
  END IF;
  INSERT INTO prediction_events (prediction_id, event, data, attempt, tokens)
    VALUES (p_prediction_id, 'output', p_data, p_attempt, p_tokens)
    RETURNING id INTO v_id;
  PERFORM pg_notify('kiln_prediction_events', p_prediction_id || ' output');
  RETURN v_id;
END
$$;
--> statement-breakpoint
-- The first output chunk of an engine attempt (db/events.ts appendFirstOutput), also in one round trip: the attempt it
-- is written as (p_attempt, or for a workflow that does not number them the next one after any output), a `reset`
-- ahead of it where a failed attempt's output is in the stream and this attempt does not continue it, and the chunk.
-- id NULL: a later attempt (current) writes the stream now.
CREATE OR REPLACE FUNCTION kiln_append_first_output(p_prediction_id text, p_data text, p_attempt integer, p_tokens integer,
  OUT id bigint, OUT attempt integer, OUT current integer)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_last record;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(p_prediction_id));
  SELECT e.event, e.attempt INTO v_last FROM prediction_events e
    WHERE e.prediction_id = p_prediction_id AND e.event IN ('output', 'reset', 'attempt')
    ORDER BY e.id DESC LIMIT 1;
  attempt := coalesce(p_attempt, CASE WHEN v_last IS NULL THEN 1 WHEN v_last.event = 'attempt' THEN v_last.attempt ELSE v_last.attempt + 1 END);
  current := coalesce(v_last.attempt, attempt);
  IF v_last IS NOT NULL AND v_last.attempt > attempt THEN
    RETURN;
  END IF;
  -- An `attempt` event of this very attempt (it continues the text) is never older than it: a reset only voids older output.
  IF v_last IS NOT NULL AND v_last.attempt < attempt THEN
    INSERT INTO prediction_events (prediction_id, event, data, attempt) VALUES (p_prediction_id, 'reset', '{"attempt":' || attempt || '}', attempt);
  END IF;
  INSERT INTO prediction_events AS e (prediction_id, event, data, attempt, tokens)
    VALUES (p_prediction_id, 'output', p_data, attempt, p_tokens)
    RETURNING e.id INTO id;
  PERFORM pg_notify('kiln_prediction_events', p_prediction_id || ' output');
END
$$;
