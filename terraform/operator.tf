# The operator tick: every few minutes Cloud Scheduler asks map's on_http to start the crawl of every
# site that is due (sites, schedules and `--every auto` live in the database: `gleaner sites add`).
# Replaces one Scheduler job per crawl. Two deliveries of one tick start one run per site: the tick
# claims due sites in the database (gleaner/operator/schedule.py).
# The sweep settles runs idle past the limit (run control). The index job moves fresh vectors into
# the HNSW graph, within map-http's timeout, when no run is active (gleaner/retrieval/upkeep.py):
# crawls never do. All three prove who they are with an OIDC token of gl-scheduler, the only Scheduler identity map-http admits (scheduler.tf, functions.tf).
locals {
  operator_jobs = {
    tick  = { schedule = var.tick_schedule, body = { tick = true } }
    sweep = { schedule = var.sweep_schedule, body = { sweep = true } }
    index = { schedule = var.index_schedule, body = { index = true } }
  }
}

resource "google_cloud_scheduler_job" "operator" {
  for_each  = local.operator_jobs
  name      = "gleaner-${each.key}"
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
    body        = base64encode(jsonencode(each.value.body))
    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = local.map_http_uri
    }
  }

  depends_on = [google_project_service.enabled]
}
