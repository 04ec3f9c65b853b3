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

variable "archives" {
  description = "Object name in source_bucket of each functions/<dir>'s archive (infra/package_functions.py writes them as functions/<dir>-<content hash>.zip and prints this map): an unchanged one keeps its name, so its function is not redeployed."
  type        = map(string)
  validation {
    condition     = alltrue([for dir in ["map", "sample", "scrape", "snapshot", "ingest", "backoffice", "notify"] : contains(keys(var.archives), dir)])
    error_message = "archives needs an object for every function directory: map, sample, scrape, snapshot, ingest, backoffice, notify."
  }
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

variable "db_retained_backups" {
  description = "Daily Cloud SQL backups kept. An erased row stays in the backups taken before the erasure until they age out (docs/provenance.md)."
  type        = number
  default     = 7
}

variable "db_log_retention_days" {
  description = "Days of WAL Cloud SQL keeps for point-in-time recovery (1-7). An erased row stays in it that long (docs/provenance.md)."
  type        = number
  default     = 7
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
  description = "NOLOGIN, DML-only role shared by every function's IAM database user (see the db_bootstrap_sql output)."
  type        = string
  default     = "gleaner_app"
}

variable "database_owner_role" {
  description = "NOLOGIN role that owns the schema; only the migrator (the build's identity) is a member."
  type        = string
  default     = "gleaner_owner"
}

variable "function_memory" {
  description = "Memory per function instance."
  type        = string
  default     = "1Gi"
}

variable "db_max_connections" {
  description = "max_connections of the Cloud SQL instance; the functions' max instances and pools are sized against it (functions.tf, docs/deployment.md)."
  type        = number
  default     = 120
}

variable "max_delivery_attempts" {
  description = "Deliveries of a message or task before it is dead-lettered / given up (Pub/Sub allows 5-100). A 429 from a function at its max instances counts as one, hence well above the minimum."
  type        = number
  default     = 15
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

variable "webhook_secret_id" {
  description = "Secret Manager secret holding the bearer token for callers that are not Google identities (created once by an operator)."
  type        = string
  default     = "gleaner-webhook-secret"
}

variable "erasure_key_secret_id" {
  description = "Secret Manager secret holding GLEANER_ERASURE_KEY (64 hex digits; created once by an operator)."
  type        = string
  default     = "gleaner-erasure-key"
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
  description = "Cron of the feed walk nudge (an ArticlesAccepted walk message on articles-accepted)."
  type        = string
  default     = "0 * * * *"
}

variable "sweep_schedule" {
  description = "Cron of the sweep: map-http settles runs idle past the limit."
  type        = string
  default     = "*/15 * * * *"
}

variable "index_schedule" {
  description = "Cron of the vector index's upkeep (POST {\"index\": true} to map): fresh vectors into the HNSW graph when no run is active."
  type        = string
  default     = "*/30 * * * *"
}

variable "operators" {
  description = "Members (user:…, group:…, serviceAccount:…) who may call map-http: console test tab, gcloud functions call, gleaner submit."
  type        = list(string)
  default     = []
  validation {
    condition     = !anytrue([for m in var.operators : contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "map-http admits identities Cloud Run checked; allUsers would let anyone in."
  }
}

variable "feed_pollers" {
  description = "Members (usually serviceAccount:…) who may call the ingest webhook (they also send the bearer)."
  type        = list(string)
  default     = []
  validation {
    condition     = !anytrue([for m in var.feed_pollers : contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "The webhook admits identities Cloud Run checked; allUsers would let anyone reach it."
  }
}

variable "notification_channels" {
  description = "Monitoring notification channel ids the alert policies notify (create them in the console or with gcloud)."
  type        = list(string)
  default     = []
}

variable "oldest_unacked_alert_seconds" {
  description = "Alert when a stage's oldest waiting message is older than this."
  type        = number
  default     = 3600
}

variable "llm_provider" {
  description = "The language-model page decider's provider: none (the rules decide), gemini (Vertex AI) or openai (an OpenAI-compatible endpoint). docs/llm.md."
  type        = string
  default     = "none"
  validation {
    condition     = contains(["none", "gemini", "openai"], var.llm_provider)
    error_message = "llm_provider is none, gemini or openai."
  }
}

variable "llm_model" {
  description = "The model's name as the provider knows it (e.g. gemini-2.5-flash); required once llm_provider is set."
  type        = string
  default     = ""
}

variable "llm_base_url" {
  description = "llm_provider = openai: the endpoint, ending in /v1 (empty: OpenAI's own)."
  type        = string
  default     = ""
}

variable "llm_api_key_secret_id" {
  description = "llm_provider = openai: the Secret Manager secret holding the endpoint's key (created once by an operator); empty for none."
  type        = string
  default     = ""
}

variable "llm_run_max_calls" {
  description = "A run's model calls at most; past them the rules decide (GLEANER_LLM_RUN_MAX_CALLS)."
  type        = number
  default     = 200
}

variable "llm_run_max_tokens" {
  description = "A run's model tokens at most; past them the rules decide (GLEANER_LLM_RUN_MAX_TOKENS)."
  type        = number
  default     = 200000
}
