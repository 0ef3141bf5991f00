ALTER TABLE "nodes" ADD COLUMN "role" text DEFAULT 'both' NOT NULL;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "load" jsonb;