# The scrape queue: one task per batch of at most 100 URLs, named {run_id}-{batch_no}.
resource "google_cloud_tasks_queue" "scrape" {
  name     = "gleaner-scrape"
  location = var.region

  rate_limits {
    max_dispatches_per_second = var.scrape_max_dispatches_per_second
    max_concurrent_dispatches = var.scrape_max_concurrent_dispatches
  }

  # The scrape function reads X-CloudTasks-TaskRetryCount: on the last attempt it records the
  # batch's URLs as unavailable and answers 200, so the same number must be configured here.
  retry_config {
    max_attempts  = var.max_delivery_attempts
    min_backoff   = "10s"
    max_backoff   = "600s"
    max_doublings = 4
  }
}

resource "google_cloud_tasks_queue_iam_member" "sample_enqueues" {
  name     = google_cloud_tasks_queue.scrape.id
  location = var.region
  role     = "roles/cloudtasks.enqueuer"
  member   = "serviceAccount:${google_service_account.fn["sample"].email}"
}
