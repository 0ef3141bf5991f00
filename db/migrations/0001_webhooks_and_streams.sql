CREATE TABLE "prediction_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"prediction_id" text NOT NULL,
	"event" text NOT NULL,
	"data" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"prediction_id" text NOT NULL,
	"account_id" text NOT NULL,
	"webhook_id" text NOT NULL,
	"event" text NOT NULL,
	"url" text NOT NULL,
	"attempt" integer NOT NULL,
	"status_code" integer,
	"latency_ms" integer,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_secrets" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"key" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "predictions" ADD COLUMN "webhook" text;--> statement-breakpoint
ALTER TABLE "predictions" ADD COLUMN "webhook_events_filter" jsonb;--> statement-breakpoint
ALTER TABLE "predictions" ADD COLUMN "deadline" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhook_secrets" ADD CONSTRAINT "webhook_secrets_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "prediction_events_prediction_idx" ON "prediction_events" USING btree ("prediction_id","id");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_prediction_idx" ON "webhook_deliveries" USING btree ("prediction_id","id");--> statement-breakpoint
CREATE INDEX "webhook_secrets_account_idx" ON "webhook_secrets" USING btree ("account_id","created_at");