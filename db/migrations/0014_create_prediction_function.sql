-- The API's create in one round trip (api/create-prediction.ts, createAdmitted in db/predictions.ts): the first
-- row, then, under the account's admission lock, its slot when the account has room. Each statement of a VOLATILE
-- function takes a new snapshot, so the count after the lock sees every slot taken before the lock was ours (as
-- takeSlot's statement after lockAdmissions does). `inserted` is false where the row was there already (a create
-- retried with its Idempotency-Key, whose workflow admits it). JSON null in the row is SQL NULL.
CREATE OR REPLACE FUNCTION kiln_create_prediction(p_row jsonb, p_cap integer)
RETURNS TABLE (inserted boolean, admitted boolean, held integer)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_id text := p_row->>'id';
  v_account text := p_row->>'account_id';
  v_held integer;
BEGIN
  INSERT INTO predictions (id, account_id, model, version_id, input, output, logs, error, status, metrics, source,
      webhook, webhook_events_filter, deadline, created_at, started_at, completed_at, revision, run_id)
    SELECT r.id, r.account_id, r.model, r.version_id, r.input, NULLIF(r.output, 'null'::jsonb), r.logs, r.error, r.status,
      r.metrics, r.source, r.webhook, NULLIF(r.webhook_events_filter, 'null'::jsonb), r.deadline, r.created_at,
      r.started_at, r.completed_at, r.revision, r.run_id
    FROM jsonb_populate_record(NULL::predictions, p_row) AS r
    ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, false, 0;
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('admission:' || v_account));
  SELECT count(*)::integer INTO v_held FROM admissions WHERE account_id = v_account;
  -- A slot left for this id (an undone create's) is its own.
  IF EXISTS (SELECT 1 FROM admissions WHERE prediction_id = v_id) THEN
    RETURN QUERY SELECT true, true, v_held;
    RETURN;
  END IF;
  IF v_held < p_cap THEN
    INSERT INTO admissions (prediction_id, account_id) VALUES (v_id, v_account);
    RETURN QUERY SELECT true, true, v_held + 1;
    RETURN;
  END IF;
  RETURN QUERY SELECT true, false, v_held;
END
$$;
