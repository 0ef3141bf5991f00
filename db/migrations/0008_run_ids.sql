ALTER TABLE "batches" ADD COLUMN "run_id" text;--> statement-breakpoint
ALTER TABLE "predictions" ADD COLUMN "run_id" text;