# Cloud Scheduler calls map-http with an OIDC token of gl-scheduler (IAM admits it; no secret in
# the job or in the Terraform state). A retried job keeps one request: the function derives the
# request id from X-CloudScheduler-JobName + ScheduleTime.

locals {
  map_http_uri = google_cloudfunctions2_function.http["map-http"].service_config[0].uri
  # Operator jobs: map-http's on_http starts every due site ({"tick": true}) and settles runs idle
  # past the limit ({"sweep": true}).
  operator_jobs = {
    tick  = { schedule = var.tick_schedule, body = { tick = true } }
    sweep = { schedule = var.sweep_schedule, body = { sweep = true } }
  }
  # The feed walk nudge, published straight to articles-accepted (an encoded ArticlesAccepted):
  # ingest lands every pending article; no HTTP endpoint or credential is involved.
  walk_message = "{\"data\":{\"article_ids\":[],\"full_reprocess\":false,\"walk\":true},\"type\":\"ArticlesAccepted\",\"v\":1}"
}

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
    uri         = local.map_http_uri
    http_method = "POST"
    headers     = { "Content-Type" = "application/json" }
    body = base64encode(jsonencode({ for k, v in {
      url         = each.value.url
      site_domain = each.value.site_domain
      limit       = each.value.limit
      max_depth   = each.value.max_depth
      include     = each.value.include
      exclude     = each.value.exclude
    } : k => v if v != null }))
    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = local.map_http_uri
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_cloud_scheduler_job" "operator" {
  for_each  = local.operator_jobs
  name      = "gleaner-${each.key}"
  region    = var.region
  schedule  = each.value.schedule
  time_zone = var.time_zone

  retry_config {
    retry_count          = 1
    min_backoff_duration = "30s"
  }

  http_target {
    uri         = local.map_http_uri
    http_method = "POST"
    headers     = { "Content-Type" = "application/json" }
    body        = base64encode(jsonencode(each.value.body))
    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = local.map_http_uri
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_cloud_scheduler_job" "feed_walk" {
  name      = "gleaner-feed-walk"
  region    = var.region
  schedule  = var.feed_walk_schedule
  time_zone = var.time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.topic["articles-accepted"].id
    data       = base64encode(local.walk_message)
    attributes = { type = "ArticlesAccepted" }
  }

  depends_on = [google_project_service.enabled]
}
