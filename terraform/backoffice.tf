# The back office (/v1/ JSON API, /ui/ pages) as its own function, gleaner-backoffice (declared
# with the other HTTP functions in functions.tf; its code is functions/backoffice/main.py).
# It is not one of the five pipeline stages: no topic feeds it and it publishes none.
#
# Two gates, both required: Cloud Run admits only var.backoffice_invokers (nothing public, and
# not the feed webhook's invokers: the back office no longer rides on ingest's HTTP trigger), then
# the code wants the operator bearer (GLEANER_WEBHOOK_SECRET: every site) or a site token
# (`gleaner tokens add --site-domain SITE`: that site only). IAM alone makes nobody the operator.

variable "backoffice_invokers" {
  description = "Members (user:…, group:…, serviceAccount:…) who may reach the back office function; the code then asks for the operator bearer or a site token."
  type        = list(string)
  default     = []
  validation {
    condition     = !anytrue([for m in var.backoffice_invokers : contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "The back office admits identities Cloud Run checked; allUsers would let anyone reach it."
  }
}

resource "google_cloud_run_service_iam_member" "backoffice_invokers" {
  for_each = toset(var.backoffice_invokers)
  location = var.region
  service  = google_cloudfunctions2_function.http["backoffice"].name
  role     = "roles/run.invoker"
  member   = each.value
}

output "backoffice_url" {
  description = "The back office function's URL (open it through `gcloud run services proxy gleaner-backoffice`)."
  value       = google_cloudfunctions2_function.http["backoffice"].url
}
