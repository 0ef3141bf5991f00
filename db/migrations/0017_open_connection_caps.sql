ALTER TABLE "accounts" ADD COLUMN "max_open_streams" integer;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "max_waiting_requests" integer;