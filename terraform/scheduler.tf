# Recurring crawls: Cloud Scheduler POSTs the crawl request to map's on_http. A retried tick keeps
# one run: the function derives the request id from X-CloudScheduler-JobName + ScheduleTime.
resource "google_cloud_scheduler_job" "crawl" {
  for_each  = var.crawls
  name      = "gleaner-crawl-${each.key}"
  region    = var.region
  schedule  = each.value.schedule
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
    body = base64encode(jsonencode({ for k, v in {
      url         = each.value.url
      site_domain = each.value.site_domain
      limit       = each.value.limit
      max_depth   = each.value.max_depth
      include     = each.value.include
      exclude     = each.value.exclude
    } : k => v if v != null }))
  }
}

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
