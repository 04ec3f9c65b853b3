# The scrape queue: one task per batch, named {run_id}-{batch_no} (and -p{N} for the remainder a
# batch hands on at its soft deadline).
resource "google_cloud_tasks_queue" "scrape" {
  name     = "gleaner-scrape"
  location = var.region

  rate_limits {
    max_dispatches_per_second = var.scrape_max_dispatches_per_second
    # No more batches at once than the scrape instances serve: a dispatch beyond them is answered 429
    # and spends an attempt. Politeness per host is kept by knowledge.host_slots whatever this is, and
    # a site's batches beyond its concurrency go back to the queue (knowledge.site_leases).
    max_concurrent_dispatches = local.http_functions["scrape"].max_instances * local.http_functions["scrape"].concurrency
  }

  # The scrape function reads X-CloudTasks-TaskRetryCount: on the last attempt it records the
  # batch's URLs as unavailable and answers 200, so the same number must be configured here.
  retry_config {
    max_attempts  = var.max_delivery_attempts
    min_backoff   = "10s"
    max_backoff   = "600s"
    max_doublings = 4
  }

  depends_on = [google_project_service.enabled]
}

resource "google_cloud_tasks_queue_iam_member" "enqueuers" {
  for_each = toset(local.enqueues_scrape)
  name     = google_cloud_tasks_queue.scrape.id
  location = var.region
  role     = "roles/cloudtasks.enqueuer"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# A waiting batch sent for early no longer needs its delayed task: scrape deletes it (DeleteTask)
# rather than pay for an invocation that finds the batch run and does nothing.
resource "google_cloud_tasks_queue_iam_member" "task_deleters" {
  for_each = toset(local.deletes_scrape_tasks)
  name     = google_cloud_tasks_queue.scrape.id
  location = var.region
  role     = "roles/cloudtasks.taskDeleter"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}
