CREATE TABLE "admissions" (
	"prediction_id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "rate_limit_counters" (
	"account_id" text NOT NULL,
	"scope" text NOT NULL,
	"window_start" timestamp with time zone NOT NULL,
	"count" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "rate_limit_counters_account_id_scope_window_start_pk" PRIMARY KEY("account_id","scope","window_start")
);
--> statement-breakpoint
CREATE TABLE "usage_records" (
	"prediction_id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"model" text NOT NULL,
	"version_id" text NOT NULL,
	"task" text NOT NULL,
	"status" text NOT NULL,
	"hardware" text NOT NULL,
	"predict_seconds" real DEFAULT 0 NOT NULL,
	"input_tokens" integer DEFAULT 0 NOT NULL,
	"output_tokens" integer DEFAULT 0 NOT NULL,
	"images" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "fairness_weight" real DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "fairness_group" text;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "max_running" integer DEFAULT 64 NOT NULL;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "max_queued" integer DEFAULT 1000 NOT NULL;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "over_cap" text DEFAULT 'wait' NOT NULL;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "rate_limits" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "models" ADD COLUMN "allowed_accounts" text[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
CREATE INDEX "admissions_account_idx" ON "admissions" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "usage_account_created_idx" ON "usage_records" USING btree ("account_id","created_at");