# One Cloud Function (2nd gen) per entry point of functions/<stage>/main.py, each built from the
# archive Cloud Build uploaded (main.py + the vendored gleaner package + requirements.txt).
# Pub/Sub-fed functions are plain HTTPS services behind explicit push subscriptions (pubsub.tf):
# that is the only way to declare their dead-letter and retry policies here, and it is the exact
# delivery path the emulator tests exercise. Their entry points are registered with
# @functions_framework.cloud_event, so functions-framework turns each push into a CloudEvent.

locals {
  http_functions = {
    # Crawl requests from Cloud Scheduler, the console and the CLI; bearer-checked by the code.
    "map-http" = { stage = "map", entry_point = "on_http", public = true, timeout = 60 }
    # The Cloud Tasks target: one scrape batch per request, up to the task dispatch deadline.
    "scrape" = { stage = "scrape", entry_point = "on_http", public = false, timeout = 1800 }
    # The feed-poller webhook (articles and the walk nudge); bearer-checked by the code.
    "ingest-webhook" = { stage = "ingest", entry_point = "on_http", public = true, timeout = 300 }
  }
  event_functions = {
    "map"      = { stage = "map", entry_point = "on_event", timeout = 540 }
    "sample"   = { stage = "sample", entry_point = "on_event", timeout = 540 }
    "snapshot" = { stage = "snapshot", entry_point = "on_event", timeout = 540 }
    "ingest"   = { stage = "ingest", entry_point = "on_event", timeout = 540 }
  }
  all_functions = merge(local.http_functions, local.event_functions)
  # Functions that read the bearer secret.
  secret_functions = ["map-http", "ingest-webhook"]
  # Functions that never touch the database (map-http only validates and publishes).
  no_db_functions = ["map-http"]

  common_env = {
    GOOGLE_CLOUD_PROJECT          = var.project_id
    GLEANER_REGION                = var.region
    GLEANER_BUS                   = "gcp"
    GLEANER_BLOB_URL              = "gs://${google_storage_bucket.blobs.name}"
    GLEANER_CLOUDSQL_INSTANCE     = google_sql_database_instance.main.connection_name
    GLEANER_CLOUDSQL_DATABASE     = google_sql_database.gleaner.name
    GLEANER_DATABASE_ROLE         = var.database_role
    GLEANER_TASKS_QUEUE           = google_cloud_tasks_queue.scrape.name
    GLEANER_MAX_DELIVERY_ATTEMPTS = tostring(var.max_delivery_attempts)
    GLEANER_EXTRACT_WORKERS       = "1"
    LOG_EXECUTION_ID              = "true"
  }
}

resource "google_cloudfunctions2_function" "http" {
  for_each = local.http_functions
  name     = "gleaner-${each.key}"
  location = var.region

  build_config {
    runtime     = "python311"
    entry_point = each.value.entry_point
    source {
      storage_source {
        bucket = var.source_bucket
        object = "${var.source_prefix}/${each.value.stage}.zip"
      }
    }
  }

  service_config {
    available_memory                 = var.function_memory
    available_cpu                    = "1"
    timeout_seconds                  = each.value.timeout
    max_instance_count               = var.function_max_instances
    max_instance_request_concurrency = 1
    service_account_email            = google_service_account.fn[each.key].email
    ingress_settings                 = each.value.public ? "ALLOW_ALL" : "ALLOW_INTERNAL_ONLY"
    environment_variables = merge(local.common_env, {
      GLEANER_CLOUDSQL_USER = trimsuffix(google_service_account.fn[each.key].email, ".gserviceaccount.com")
    })

    dynamic "secret_environment_variables" {
      for_each = contains(local.secret_functions, each.key) ? [1] : []
      content {
        key        = "GLEANER_WEBHOOK_SECRET"
        project_id = var.project_id
        secret     = data.google_secret_manager_secret.webhook.secret_id
        version    = "latest"
      }
    }
  }

  depends_on = [google_secret_manager_secret_iam_member.webhook]
}

resource "google_cloudfunctions2_function" "event" {
  for_each = local.event_functions
  name     = "gleaner-${each.key}"
  location = var.region

  build_config {
    runtime     = "python311"
    entry_point = each.value.entry_point
    source {
      storage_source {
        bucket = var.source_bucket
        object = "${var.source_prefix}/${each.value.stage}.zip"
      }
    }
  }

  service_config {
    available_memory                 = var.function_memory
    available_cpu                    = "1"
    timeout_seconds                  = each.value.timeout
    max_instance_count               = var.function_max_instances
    max_instance_request_concurrency = 1
    service_account_email            = google_service_account.fn[each.key].email
    # Pub/Sub push counts as internal traffic for Cloud Run ingress.
    ingress_settings = "ALLOW_INTERNAL_ONLY"
    environment_variables = merge(local.common_env, {
      GLEANER_CLOUDSQL_USER = trimsuffix(google_service_account.fn[each.key].email, ".gserviceaccount.com")
      # sample schedules scrape tasks: where they go and who they claim to be.
      GLEANER_SCRAPE_URL            = google_cloudfunctions2_function.http["scrape"].service_config[0].uri
      GLEANER_TASKS_SERVICE_ACCOUNT = google_service_account.tasks_invoker.email
    })
  }
}

# Who may call which function (Cloud Run invoker on the function's service).
resource "google_cloud_run_service_iam_member" "public" {
  for_each = { for k, v in local.http_functions : k => v if v.public }
  location = var.region
  service  = google_cloudfunctions2_function.http[each.key].name
  role     = "roles/run.invoker"
  # Anyone may reach the endpoint; the code refuses every request without the bearer secret (401).
  member = "allUsers"
}

resource "google_cloud_run_service_iam_member" "tasks_to_scrape" {
  location = var.region
  service  = google_cloudfunctions2_function.http["scrape"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.tasks_invoker.email}"
}

resource "google_cloud_run_service_iam_member" "push_to_events" {
  for_each = local.event_functions
  location = var.region
  service  = google_cloudfunctions2_function.event[each.key].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.pubsub_push.email}"
}
