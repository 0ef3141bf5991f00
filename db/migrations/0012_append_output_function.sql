-- One output chunk of an engine attempt in one round trip (db/events.ts appendOutput): the stream's lock, the attempt
-- fence and the insert, each statement with a snapshot taken after the lock (a volatile function's statements take
-- their own), as the separate statements of a transaction did. NULL: a later attempt writes the stream now.
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
  PERFORM pg_notify('kiln_prediction_events', p_prediction_id);
  RETURN v_id;
END
$$;
