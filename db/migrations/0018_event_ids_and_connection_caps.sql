-- Stream event ids per prediction (db/schema.ts predictionEvents.seq): the serial id is one sequence for every
-- account, and a client that saw it read the platform's volume from it. Each prediction gets its own counter; a
-- trigger numbers every insert, whoever writes it (the API, the control worker, the engine's functions of migrations
-- 0012 and 0013), under the stream's advisory lock those writers already hold, so `seq` grows in commit order as `id`
-- does. The counter never goes back: a new run deletes the old run's `done`, and the next event gets a new number.
CREATE TABLE "prediction_event_counters" (
	"prediction_id" text PRIMARY KEY NOT NULL,
	"last_seq" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "prediction_events" ADD COLUMN "seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE "prediction_events" AS e SET "seq" = n.seq
  FROM (SELECT id, row_number() OVER (PARTITION BY prediction_id ORDER BY id) AS seq FROM "prediction_events") AS n
  WHERE e.id = n.id;--> statement-breakpoint
INSERT INTO "prediction_event_counters" ("prediction_id", "last_seq")
  SELECT prediction_id, max(seq) FROM "prediction_events" GROUP BY prediction_id;--> statement-breakpoint
CREATE UNIQUE INDEX "prediction_events_prediction_seq_idx" ON "prediction_events" USING btree ("prediction_id","seq");--> statement-breakpoint
-- SECURITY DEFINER: the engine's role inserts events and may not touch the counters itself.
CREATE OR REPLACE FUNCTION kiln_number_prediction_event()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public
AS $$
BEGIN
  INSERT INTO prediction_event_counters AS c (prediction_id, last_seq) VALUES (NEW.prediction_id, 1)
    ON CONFLICT (prediction_id) DO UPDATE SET last_seq = c.last_seq + 1
    RETURNING last_seq INTO NEW.seq;
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE TRIGGER prediction_events_seq BEFORE INSERT ON "prediction_events"
  FOR EACH ROW EXECUTE FUNCTION kiln_number_prediction_event();
--> statement-breakpoint
-- Per-account caps on open connections (null: the server's KILN_MAX_OPEN_STREAMS and KILN_MAX_WAITING_REQUESTS).
ALTER TABLE "accounts" ADD COLUMN "max_open_streams" integer;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "max_waiting_requests" integer;