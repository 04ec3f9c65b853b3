# What an operator watches: counts read from the functions' JSON log lines (gleaner/logs.py: the
# `event` field and its values, logs.Event) and alerts on what needs a person.

locals {
  log_source = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name:\"gleaner-\""
  # Counts carried by each scrape task's summary line (event "scrape-batch").
  page_counts = {
    pages_fetched      = "Pages fetched (200) by scrape tasks"
    pages_not_modified = "Pages that answered 304"
    pages_failed       = "Pages the site failed to serve, or refused by policy"
    pages_handed_on    = "URLs a task left to its continuation at the soft deadline"
  }
  # One line per occurrence: counted, not extracted.
  event_counts = {
    dead_letters  = { event = "dead-letter", what = "Messages that exhausted their deliveries (recorded as failures)" }
    tasks_gave_up = { event = "task-gave-up", what = "Scrape tasks given up on their last attempt" }
    runs_stuck    = { event = "run-swept", what = "Runs idle past the limit that the sweep had to settle" }
  }
  push_subscription_pattern = join("|", [for topic, fn in local.push_routes : "${topic}-${local.event_functions[fn].stage}"])
}

resource "google_logging_metric" "pages" {
  for_each        = local.page_counts
  name            = "gleaner/${each.key}"
  description     = each.value
  filter          = "${local.log_source} AND jsonPayload.event=\"scrape-batch\""
  value_extractor = "EXTRACT(jsonPayload.${each.key})"
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "1"
  }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 8
      growth_factor      = 2
      scale              = 1
    }
  }
  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "events" {
  for_each    = local.event_counts
  name        = "gleaner/${each.key}"
  description = each.value.what
  filter      = "${local.log_source} AND jsonPayload.event=\"${each.value.event}\""
  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
  depends_on = [google_project_service.enabled]
}

resource "google_monitoring_alert_policy" "dead_letter_backlog" {
  display_name          = "Gleaner: dead letters waiting"
  combiner              = "OR"
  notification_channels = var.notification_channels
  documentation {
    content = "Messages reached dead-letters (their failure is recorded on the run). Inspect: gcloud pubsub subscriptions pull dead-letters-hold --limit=10 --auto-ack"
  }
  conditions {
    display_name = "dead-letters-hold has undelivered messages"
    condition_threshold {
      filter          = "resource.type = \"pubsub_subscription\" AND resource.labels.subscription_id = \"${google_pubsub_subscription.dead_letter_hold.name}\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "300s"
      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
    }
  }
  depends_on = [google_project_service.enabled]
}

resource "google_monitoring_alert_policy" "oldest_unacked" {
  display_name          = "Gleaner: a stage is falling behind"
  combiner              = "OR"
  notification_channels = var.notification_channels
  documentation {
    content = "A push subscription's oldest message waited longer than expected: its function fails, or is at max instances (429s). See the function's logs."
  }
  conditions {
    display_name = "oldest unacked message age"
    condition_threshold {
      filter          = "resource.type = \"pubsub_subscription\" AND metric.type = \"pubsub.googleapis.com/subscription/oldest_unacked_message_age\" AND resource.labels.subscription_id = monitoring.regex.full_match(\"${local.push_subscription_pattern}\")"
      comparison      = "COMPARISON_GT"
      threshold_value = var.oldest_unacked_alert_seconds
      duration        = "300s"
      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
    }
  }
  depends_on = [google_project_service.enabled]
}

# Cloud Monitoring refuses an alert on a log-based metric until the metric has propagated, up to
# about ten minutes after it was created (terraform-provider-google issue 11102): created in the same
# apply, the alert fails with "Cannot find metric(s)" and the first apply stops part-way. Alerts on
# these metrics depend on this delay, which restarts whenever a metric is replaced.
resource "time_sleep" "log_metrics_propagate" {
  create_duration = "600s"
  triggers = {
    metrics = join(",", concat([for m in google_logging_metric.events : m.id], [for m in google_logging_metric.pages : m.id]))
  }
}

resource "google_monitoring_alert_policy" "stuck_runs" {
  display_name          = "Gleaner: runs got stuck or tasks were given up"
  combiner              = "OR"
  notification_channels = var.notification_channels
  documentation {
    content = "The sweep settled idle runs, or scrape tasks exhausted their attempts. `gleaner runs RUN_ID --urls` (or GET map-http ?run_id=) shows what each URL ended with."
  }
  dynamic "conditions" {
    for_each = { runs_stuck = google_logging_metric.events["runs_stuck"], tasks_gave_up = google_logging_metric.events["tasks_gave_up"] }
    content {
      display_name = conditions.key
      condition_threshold {
        filter          = "resource.type = \"cloud_run_revision\" AND metric.type = \"logging.googleapis.com/user/${conditions.value.name}\""
        comparison      = "COMPARISON_GT"
        threshold_value = 0
        duration        = "0s"
        aggregations {
          alignment_period     = "600s"
          per_series_aligner   = "ALIGN_SUM"
          cross_series_reducer = "REDUCE_SUM"
        }
      }
    }
  }
  depends_on = [time_sleep.log_metrics_propagate]
}
