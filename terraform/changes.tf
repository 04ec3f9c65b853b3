# Keeping the copy: change events on `documents-changed` and webhook deliveries on the notify queue
# (DESIGN.md "Change events", "Outbound notifications"; gleaner/changes/).

variable "notify_max_attempts" {
  description = "Attempts of one webhook delivery before it is marked failed (GLEANER_NOTIFY_MAX_ATTEMPTS)."
  type        = number
  default     = 8
}

locals {
  # Functions that record change events and publish them from the outbox after their commit.
  announces = ["map", "scrape", "snapshot", "ingest"]
  # Functions that schedule delivery tasks (they know the notify function's URL, the tasks' target):
  # every one that flushes the outbox (tests/unit/test_deploy_config.py reads the code's call sites).
  schedules_deliveries = ["map", "scrape", "snapshot", "ingest"]
}

# Downstream systems (RAG ingestors) subscribe here; each message is one event's JSON, attributes
# type, site_domain and event_id. Gleaner itself does not subscribe.
resource "google_pubsub_topic" "documents_changed" {
  name       = "documents-changed"
  depends_on = [google_project_service.enabled]
}

resource "google_pubsub_topic_iam_member" "announce" {
  for_each = toset(local.announces)
  topic    = google_pubsub_topic.documents_changed.id
  role     = "roles/pubsub.publisher"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# One task per delivery, named after it, POSTed to the notify function (functions/notify), which makes
# one attempt and answers 503 on failure: Cloud Tasks backs off (first retry within seconds) and the
# handler marks the delivery failed on the last attempt.
resource "google_cloud_tasks_queue" "notify" {
  name     = "gleaner-notify"
  location = var.region

  rate_limits {
    max_dispatches_per_second = 50
    # No more at once than the notify function serves (max_instances x concurrency, functions.tf):
    # a dispatch beyond it meets a 429 and spends one of the delivery's attempts.
    max_concurrent_dispatches = 16
  }

  retry_config {
    max_attempts  = var.notify_max_attempts
    min_backoff   = "5s"
    max_backoff   = "3600s"
    max_doublings = 10
  }

  depends_on = [google_project_service.enabled]
}

resource "google_cloud_tasks_queue_iam_member" "schedules_deliveries" {
  for_each = toset(local.schedules_deliveries)
  name     = google_cloud_tasks_queue.notify.id
  location = var.region
  role     = "roles/cloudtasks.enqueuer"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# Delivery tasks present the tasks identity (which may invoke notify) with an OIDC token.
resource "google_service_account_iam_member" "acts_as_tasks_invoker_for_deliveries" {
  for_each           = toset(local.schedules_deliveries)
  service_account_id = google_service_account.tasks_invoker.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.fn[each.key].email}"
}
