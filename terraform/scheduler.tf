# The feed "walk" nudge: an empty object to the feed-poller webhook every hour.
resource "google_cloud_scheduler_job" "feed_walk" {
  name      = "gleaner-feed-walk"
  region    = var.region
  schedule  = var.feed_walk_schedule
  time_zone = var.time_zone

  http_target {
    uri         = google_cloudfunctions2_function.http["ingest-webhook"].service_config[0].uri
    http_method = "POST"
    headers = {
      "Content-Type"  = "application/json"
      "Authorization" = "Bearer ${data.google_secret_manager_secret_version.webhook.secret_data}"
    }
    body = base64encode("{}")
  }
}
