ALTER TABLE "batches" ADD COLUMN "attempt" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "predictions" ADD COLUMN "retries" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "retries" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_records" DROP CONSTRAINT "usage_records_pkey";--> statement-breakpoint
ALTER TABLE "usage_records" ADD CONSTRAINT "usage_records_prediction_id_retries_pk" PRIMARY KEY("prediction_id","retries");
