# The operator tick: every few minutes Cloud Scheduler asks map's on_http to start the crawl of every
# site that is due (sites, schedules and `--every auto` live in the database: `gleaner sites add`).
# Replaces one Scheduler job per crawl. Two deliveries of one tick start one run per site: the tick
# claims due sites in the database (gleaner/operator/schedule.py).
resource "google_cloud_scheduler_job" "tick" {
  name      = "gleaner-tick"
  region    = var.region
  schedule  = var.tick_schedule
  time_zone = var.time_zone

  retry_config {
    retry_count          = 3
    min_backoff_duration = "30s"
  }

  http_target {
    uri         = google_cloudfunctions2_function.http["map-http"].service_config[0].uri
    http_method = "POST"
    headers = {
      "Content-Type"  = "application/json"
      "Authorization" = "Bearer ${data.google_secret_manager_secret_version.webhook.secret_data}"
    }
    body = base64encode(jsonencode({ tick = true }))
  }
}
