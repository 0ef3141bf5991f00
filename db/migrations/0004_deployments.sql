CREATE TABLE "deployments" (
	"id" text PRIMARY KEY NOT NULL,
	"owner_id" text NOT NULL,
	"owner" text NOT NULL,
	"name" text NOT NULL,
	"model_id" text NOT NULL,
	"version_id" text NOT NULL,
	"hardware" text DEFAULT 'cpu' NOT NULL,
	"min_instances" integer DEFAULT 0 NOT NULL,
	"max_instances" integer DEFAULT 1 NOT NULL,
	"release" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_owner_id_accounts_id_fk" FOREIGN KEY ("owner_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "deployments_owner_name_idx" ON "deployments" USING btree ("owner","name");