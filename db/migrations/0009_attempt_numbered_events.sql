ALTER TABLE "prediction_events" ADD COLUMN "attempt" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "prediction_events" ADD COLUMN "tokens" integer;