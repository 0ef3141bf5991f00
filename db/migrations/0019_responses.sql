CREATE TABLE "responses" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"prediction_id" text NOT NULL,
	"previous_response_id" text,
	"session" text NOT NULL,
	"request" jsonb NOT NULL,
	"context_size" integer,
	"input_items" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "responses" ADD CONSTRAINT "responses_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "responses" ADD CONSTRAINT "responses_prediction_id_predictions_id_fk" FOREIGN KEY ("prediction_id") REFERENCES "public"."predictions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "responses_prediction_idx" ON "responses" USING btree ("prediction_id");