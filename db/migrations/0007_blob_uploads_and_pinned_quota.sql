CREATE TABLE "blob_uploads" (
	"account_id" text NOT NULL,
	"sha256" text NOT NULL,
	"size" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "blob_uploads_account_id_sha256_pk" PRIMARY KEY("account_id","sha256")
);
--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "max_pinned_replicas" integer DEFAULT 2 NOT NULL;--> statement-breakpoint
ALTER TABLE "blob_uploads" ADD CONSTRAINT "blob_uploads_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "model_versions_files_idx" ON "model_versions" USING gin ("files" jsonb_path_ops);