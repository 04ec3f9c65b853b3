# Cloud Scheduler calls map-http with an OIDC token of gl-scheduler (IAM admits it; no secret in
# the job or in the Terraform state): the tick and the sweep (operator.tf). Recurring crawls are
# sites in the database (`gleaner sites add`), started by the tick.

locals {
  map_http_uri = google_cloudfunctions2_function.http["map-http"].service_config[0].uri
  # The feed walk nudge, published straight to articles-accepted (an encoded ArticlesAccepted):
  # ingest lands every pending article; no HTTP endpoint or credential is involved.
  walk_message = "{\"data\":{\"article_ids\":[],\"full_reprocess\":false,\"walk\":true},\"type\":\"ArticlesAccepted\",\"v\":1}"
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
