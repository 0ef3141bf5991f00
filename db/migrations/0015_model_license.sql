ALTER TABLE "models" ADD COLUMN "license" text;--> statement-breakpoint
ALTER TABLE "models" ADD COLUMN "license_url" text;