variable "project_id" {
  description = "Google Cloud project to deploy into."
  type        = string
}

variable "region" {
  description = "Region of the functions, queue, bucket and database."
  type        = string
  default     = "europe-west1"
}

variable "source_bucket" {
  description = "Bucket holding the function source archives uploaded by Cloud Build."
  type        = string
}

variable "source_prefix" {
  description = "Object prefix of this build's archives: <prefix>/<stage>.zip (Cloud Build passes the commit SHA)."
  type        = string
}

variable "blob_bucket" {
  description = "Name of the bucket for page bodies (GLEANER_BLOB_URL = gs://<blob_bucket>)."
  type        = string
}

variable "run_artefact_retention_days" {
  description = "Days to keep run-scoped artefacts (domains/*/runs/…: map JSON, samples, raw hand-offs). Snapshots are kept forever."
  type        = number
  default     = 30
}

variable "db_tier" {
  description = "Cloud SQL machine tier."
  type        = string
  default     = "db-custom-1-3840"
}

variable "db_disk_gb" {
  description = "Cloud SQL disk size in GB (grows automatically)."
  type        = number
  default     = 20
}

variable "deletion_protection" {
  description = "Protect the database instance from terraform destroy."
  type        = bool
  default     = true
}

variable "database_role" {
  description = "NOLOGIN role shared by every function's IAM database user (see the db_bootstrap_sql output)."
  type        = string
  default     = "gleaner_app"
}

variable "function_memory" {
  description = "Memory per function instance."
  type        = string
  default     = "1Gi"
}

variable "function_max_instances" {
  description = "Upper bound on instances per function (and so on database connections: 5 per instance)."
  type        = number
  default     = 10
}

variable "max_delivery_attempts" {
  description = "Deliveries of a message or task before it is dead-lettered / given up (Pub/Sub allows 5-100)."
  type        = number
  default     = 5
  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub dead-letter policies take 5 to 100 attempts."
  }
}

variable "scrape_max_dispatches_per_second" {
  description = "Cloud Tasks rate limit for scrape batches (each batch fetches up to 100 pages politely)."
  type        = number
  default     = 5
}

variable "scrape_max_concurrent_dispatches" {
  description = "Scrape batches running at once across all sites."
  type        = number
  default     = 10
}

variable "webhook_secret_id" {
  description = "Secret Manager secret holding the bearer token of the HTTP triggers (created once by an operator)."
  type        = string
  default     = "gleaner-webhook-secret"
}

variable "time_zone" {
  description = "Time zone of the Cloud Scheduler jobs."
  type        = string
  default     = "Etc/UTC"
}

variable "tick_schedule" {
  description = "Cron of the operator tick (POST {\"tick\": true} to map): starts every due site's crawl (gleaner sites)."
  type        = string
  default     = "*/5 * * * *"
}

variable "feed_walk_schedule" {
  description = "Cron of the hourly feed walk nudge (POST {} to the ingest webhook)."
  type        = string
  default     = "0 * * * *"
}
