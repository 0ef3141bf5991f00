CREATE TABLE "session_affinities" (
	"account_id" text NOT NULL,
	"session" text NOT NULL,
	"version_id" text NOT NULL,
	"node_id" text NOT NULL,
	"used_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "session_affinities_account_id_version_id_session_pk" PRIMARY KEY("account_id","version_id","session")
);
--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "cached_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "session_affinities" ADD CONSTRAINT "session_affinities_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;