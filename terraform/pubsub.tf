# Topics are named exactly as the message classes' `.topic` (gleaner/messages.py); the scrape
# batches travel on Cloud Tasks (tasks.tf), not on a topic. Topics other features add in their own
# files (e.g. changes.tf) are separate resources; the consistency tests read every topic resource.

locals {
  topics            = ["crawl-requests", "crawl-mapped", "pages-fetched", "snapshots-written", "articles-accepted"]
  dead_letter_topic = "dead-letters"
  # topic => the event function its push subscription delivers to (subscription "<topic>-<stage>").
  push_routes = {
    "crawl-requests"    = "map"
    "crawl-mapped"      = "sample"
    "pages-fetched"     = "snapshot"
    "snapshots-written" = "ingest"
    "articles-accepted" = "ingest"
  }
  # Dead letters are pushed to map's on_event, which records the failure on the run / URLs.
  dead_letter_handler = "map"
  pubsub_agent        = "serviceAccount:${google_project_service_identity.pubsub.email}"
}

resource "google_pubsub_topic" "topic" {
  for_each   = toset(concat(local.topics, [local.dead_letter_topic]))
  name       = each.value
  depends_on = [google_project_service.enabled]
}

resource "google_pubsub_subscription" "push" {
  for_each = local.push_routes
  name     = "${each.key}-${local.event_functions[each.value].stage}"
  topic    = google_pubsub_topic.topic[each.key].id

  # The push timeout: at least the function's own timeout, at most Pub/Sub's 600 s.
  ack_deadline_seconds = min(600, local.event_functions[each.value].timeout + 30)
  # Stages are idempotent and order-free; ordered push would hold a whole site behind one poison
  # message, so messages carry the site as ordering key but subscriptions do not enforce it.
  enable_message_ordering    = false
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = google_cloudfunctions2_function.event[each.value].service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.pubsub_push.email
      audience              = google_cloudfunctions2_function.event[each.value].service_config[0].uri
    }
  }

  # Retryable failures (the function answers 500, or Cloud Run 429 at max instances) come back
  # with exponential backoff…
  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  # …and after max_delivery_attempts (15: a 429 counts as one) go to the dead-letter topic.
  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topic[local.dead_letter_topic].id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  # The agent must be able to forward and sign before the first message arrives.
  depends_on = [google_pubsub_topic_iam_member.agent_publishes_dead_letters,
  google_service_account_iam_member.agent_signs_push_tokens]
}

resource "google_pubsub_subscription" "dead_letter_push" {
  name                       = "${local.dead_letter_topic}-${local.event_functions[local.dead_letter_handler].stage}"
  topic                      = google_pubsub_topic.topic[local.dead_letter_topic].id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = google_cloudfunctions2_function.event[local.dead_letter_handler].service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.pubsub_push.email
      audience              = google_cloudfunctions2_function.event[local.dead_letter_handler].service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [google_service_account_iam_member.agent_signs_push_tokens]
}

# Dead letters are also kept for an operator to inspect and replay (gcloud pubsub subscriptions pull).
# Its backlog is what the dead-letter alert watches (monitoring.tf).
resource "google_pubsub_subscription" "dead_letter_hold" {
  name                       = "${local.dead_letter_topic}-hold"
  topic                      = google_pubsub_topic.topic[local.dead_letter_topic].id
  message_retention_duration = "604800s"
  expiration_policy {
    ttl = ""
  }
}

# Pub/Sub's service agent (created above, before these grants) forwards undeliverable messages:
# it must publish to the dead-letter topic and subscribe to (ack on) each source subscription…
resource "google_pubsub_topic_iam_member" "agent_publishes_dead_letters" {
  topic  = google_pubsub_topic.topic[local.dead_letter_topic].id
  role   = "roles/pubsub.publisher"
  member = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "agent_forwards" {
  for_each     = google_pubsub_subscription.push
  subscription = each.value.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

# …and mint OIDC tokens for the push identity.
resource "google_service_account_iam_member" "agent_signs_push_tokens" {
  service_account_id = google_service_account.pubsub_push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}
