# One Cloud Function (2nd gen) per entry point of functions/<stage>/main.py, each built from the
# archive Cloud Build uploaded (main.py + the vendored gleaner package + requirements.txt), named
# by its content hash so an unchanged function is not redeployed.
# Pub/Sub-fed functions are plain HTTPS services behind explicit push subscriptions (pubsub.tf):
# that is the only way to declare their dead-letter and retry policies here, and it is the exact
# delivery path the emulator tests exercise. Their entry points are registered with
# @functions_framework.cloud_event, so functions-framework turns each push into a CloudEvent.
#
# No function has a public invoker: Cloud Run admits only identities holding run.invoker (the
# push, tasks and scheduler identities, var.operators, var.feed_pollers, var.backoffice_invokers), so the code may trust
# an identity token that reached it (GLEANER_HTTP_AUTH=iam, gleaner/cloud/callers.py).

locals {
  # concurrency: requests one instance serves at once (Cloud Run's max_instance_request_concurrency; above 1
  # it needs a whole vCPU). Billing is for instance time while it serves at least one request, so
  # requests that mostly wait (scrape: a site's delay between its pages; notify: a receiver's answer)
  # share an instance and their waits are paid once (docs/deployment.md, "What a page costs").
  http_functions = {
    # Crawl requests, tick and sweep from Cloud Scheduler, the console and the CLI; GET ?run_id= status.
    "map-http" = { stage = "map", entry_point = "on_http", external = true, timeout = 60, max_instances = 2, concurrency = 1 }
    # The Cloud Tasks target: one scrape batch per request, up to the task dispatch deadline. Batches of
    # different sites share an instance; batches of one site beyond its concurrency wait in the queue
    # (knowledge.site_leases), not in an instance.
    "scrape" = { stage = "scrape", entry_point = "on_http", external = false, timeout = 1800, max_instances = 5, concurrency = 8 }
    # The notify queue's target: one webhook delivery attempt per request. Its own instance, so a crawl
    # that fills scrape's can never make deliveries meet 429s and spend their attempts; one instance
    # serves as many attempts as the queue dispatches at once (changes.tf), inside the connection budget.
    "notify" = { stage = "notify", entry_point = "on_http", external = false, timeout = 60, max_instances = 1, concurrency = 16 }
    # The feed-poller webhook (articles and the walk nudge); bearer-checked by the code behind IAM.
    "ingest-webhook" = { stage = "ingest", entry_point = "on_http", external = true, timeout = 300, max_instances = 2, concurrency = 1 }
    # The back office (/v1/, /ui/): not a stage; its own invokers (backoffice.tf), then bearer or site token.
    "backoffice" = { stage = "backoffice", entry_point = "on_http", external = true, timeout = 60, max_instances = 2, concurrency = 1 }
  }
  event_functions = {
    # A tick that starts many sites queues their walks here: more instances, so the queued ones do
    # not spend their push attempts on 429s (docs/deployment.md, "Batches longer than their deadline").
    "map"      = { stage = "map", entry_point = "on_event", timeout = 540, max_instances = 4, concurrency = 1 }
    "sample"   = { stage = "sample", entry_point = "on_event", timeout = 540, max_instances = 3, concurrency = 1 }
    "snapshot" = { stage = "snapshot", entry_point = "on_event", timeout = 540, max_instances = 4, concurrency = 1 }
    "ingest"   = { stage = "ingest", entry_point = "on_event", timeout = 540, max_instances = 4, concurrency = 1 }
  }
  all_functions = merge(local.http_functions, local.event_functions)
  # Functions that read the bearer secret (callers that are not Google identities use it).
  secret_functions = ["map-http", "ingest-webhook", "backoffice"]
  # Every function reads or writes the metadata (map-http answers run status and ticks).
  db_functions = keys(local.all_functions)

  # -- the Cloud SQL connection budget (docs/deployment.md, "Connections") ----------------------
  # One request at a time per instance, but a request uses up to pool + overflow connections (the
  # scrape's fetch loop claims host turns while the stage writes outcomes).
  db_pool_size    = 2
  db_max_overflow = 1
  db_per_instance = local.db_pool_size + local.db_max_overflow
  # An instance serving several requests at once shares one bigger pool between them: a request
  # holds a connection only for a short transaction, never across a fetch.
  db_concurrent_pool_size    = 4
  db_concurrent_max_overflow = 2
  db_concurrent              = [for name, f in local.all_functions : name if f.concurrency > 1]
  db_instance_connections = { for name, f in local.all_functions : name => (
    contains(local.db_concurrent, name) ? local.db_concurrent_pool_size + local.db_concurrent_max_overflow : local.db_per_instance
  ) }
  db_peak          = sum([for name in local.db_functions : local.all_functions[name].max_instances * local.db_instance_connections[name]])
  db_reserved      = 3 # superuser_reserved_connections on Cloud SQL
  db_migrator      = 1 # the build's migrate step
  db_headroom      = 6 # an operator's psql, gcloud sql connect, the Cloud SQL console
  db_connections   = local.db_peak + local.render_db_peak + local.db_migrator + local.db_headroom
  db_scrape_budget = local.http_functions["scrape"].max_instances
  # Seconds of a scrape task's deadline kept for queueing, a cold start and finishing (common_env).
  scrape_deadline_margin = 600
  # Seconds of map's timeout kept for the level of links in flight and writing the map.
  map_deadline_margin = 180

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
    GLEANER_HTTP_AUTH             = "iam"
    GLEANER_SHARED_POLITENESS     = "true"
    GLEANER_AUTO_MIGRATE          = "false"
    GLEANER_DB_POOL_SIZE          = tostring(local.db_pool_size)
    GLEANER_DB_MAX_OVERFLOW       = tostring(local.db_max_overflow)
    # Stop starting fetches well before the task's 1,800 s dispatch deadline, which Cloud Tasks counts
    # from the dispatch: Cloud Run's request queueing and a cold start come off it before the code
    # starts its own clock, then the fetches in flight, their outcomes and the hand-on must fit.
    GLEANER_SCRAPE_SOFT_DEADLINE = tostring(local.http_functions["scrape"].timeout - local.scrape_deadline_margin)
    # Map's walk starts no new level of links past this, so it ends inside the function's timeout
    # rather than being killed and redelivered from the start until it is dead-lettered.
    GLEANER_MAP_SOFT_DEADLINE = tostring(local.event_functions["map"].timeout - local.map_deadline_margin)
    # Webhook deliveries (changes.tf): the queue, and its attempts so the handler knows the last one.
    GLEANER_NOTIFY_QUEUE        = google_cloud_tasks_queue.notify.name
    GLEANER_NOTIFY_MAX_ATTEMPTS = tostring(var.notify_max_attempts)
    LOG_EXECUTION_ID            = "true"
  }
  # Functions that create tasks for the scrape function: scrape batches (sample; scrape for the
  # remainder it hands on) and webhook deliveries (changes.tf).
  knows_scrape_url = distinct(concat(local.enqueues_scrape, local.schedules_deliveries))
  # Where those tasks go and who they claim to be. The scrape service's deterministic Cloud Run URL, not its `uri` attribute: scrape
  # needs its own address, and a function cannot reference its own attributes.
  scrape_url = "https://gleaner-scrape-${data.google_project.this.number}.${var.region}.run.app"
  # The notify function's URL, for the same reason (deliveries are created by the stages, and by scrape).
  notify_url = "https://gleaner-notify-${data.google_project.this.number}.${var.region}.run.app"
  tasks_env = {
    GLEANER_SCRAPE_URL            = local.scrape_url
    GLEANER_NOTIFY_TASK_URL       = local.notify_url
    GLEANER_TASKS_SERVICE_ACCOUNT = google_service_account.tasks_invoker.email
  }
  # What a function serving several requests at once needs: functions-framework's threads (one per
  # request it serves; its default is four per vCPU) and the shared pool counted above.
  concurrent_env = { for name in local.db_concurrent : name => {
    THREADS                 = tostring(local.all_functions[name].concurrency)
    GLEANER_DB_POOL_SIZE    = tostring(local.db_concurrent_pool_size)
    GLEANER_DB_MAX_OVERFLOW = tostring(local.db_concurrent_max_overflow)
  } }
}

resource "google_cloudfunctions2_function" "http" {
  for_each = local.http_functions
  name     = "gleaner-${each.key}"
  location = var.region

  build_config {
    runtime           = "python311"
    entry_point       = each.value.entry_point
    service_account   = google_service_account.function_build.id
    docker_repository = google_artifact_registry_repository.functions.id
    source {
      storage_source {
        bucket = var.source_bucket
        object = var.archives[each.value.stage]
      }
    }
  }

  service_config {
    available_memory                 = var.function_memory
    available_cpu                    = "1"
    timeout_seconds                  = each.value.timeout
    max_instance_count               = each.value.max_instances
    max_instance_request_concurrency = each.value.concurrency
    service_account_email            = google_service_account.fn[each.key].email
    # IAM guards every function; "external" ones are reachable from outside Google's network.
    ingress_settings = each.value.external ? "ALLOW_ALL" : "ALLOW_INTERNAL_ONLY"
    environment_variables = merge(local.common_env, contains(local.knows_scrape_url, each.key) ? local.tasks_env : {}, lookup(local.render_env, each.key, {}), lookup(local.concurrent_env, each.key, {}), {
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

    secret_environment_variables {
      key        = "GLEANER_ERASURE_KEY"
      project_id = var.project_id
      secret     = data.google_secret_manager_secret.erasure_key.secret_id
      version    = "latest"
    }
  }

  depends_on = [google_project_service.enabled, google_secret_manager_secret_iam_member.webhook,
    google_secret_manager_secret_iam_member.erasure_key, google_project_iam_member.function_build,
  google_artifact_registry_repository_iam_member.function_build]
}

resource "google_cloudfunctions2_function" "event" {
  for_each = local.event_functions
  name     = "gleaner-${each.key}"
  location = var.region

  build_config {
    runtime           = "python311"
    entry_point       = each.value.entry_point
    service_account   = google_service_account.function_build.id
    docker_repository = google_artifact_registry_repository.functions.id
    source {
      storage_source {
        bucket = var.source_bucket
        object = var.archives[each.value.stage]
      }
    }
  }

  service_config {
    available_memory                 = var.function_memory
    available_cpu                    = "1"
    timeout_seconds                  = each.value.timeout
    max_instance_count               = each.value.max_instances
    max_instance_request_concurrency = each.value.concurrency
    service_account_email            = google_service_account.fn[each.key].email
    # Pub/Sub push counts as internal traffic for Cloud Run ingress.
    ingress_settings = "ALLOW_INTERNAL_ONLY"
    environment_variables = merge(local.common_env, contains(local.knows_scrape_url, each.key) ? local.tasks_env : {}, lookup(local.render_env, each.key, {}), lookup(local.llm_env, each.key, {}), {
      GLEANER_CLOUDSQL_USER = trimsuffix(google_service_account.fn[each.key].email, ".gserviceaccount.com")
    })

    secret_environment_variables {
      key        = "GLEANER_ERASURE_KEY"
      project_id = var.project_id
      secret     = data.google_secret_manager_secret.erasure_key.secret_id
      version    = "latest"
    }

    dynamic "secret_environment_variables" {
      for_each = local.llm_with_key && contains(local.llm_callers, each.key) ? [1] : []
      content {
        key        = "GLEANER_LLM_API_KEY"
        project_id = var.project_id
        secret     = data.google_secret_manager_secret.llm_api_key[0].secret_id
        version    = "latest"
      }
    }
  }

  depends_on = [google_project_service.enabled, google_secret_manager_secret_iam_member.erasure_key,
    google_secret_manager_secret_iam_member.llm_api_key, google_project_iam_member.llm_vertex,
  google_project_iam_member.function_build, google_artifact_registry_repository_iam_member.function_build]
}

# Who may call which function (Cloud Run invoker on the function's service). Nothing is public.
resource "google_cloud_run_service_iam_member" "tasks_to_scrape" {
  location = var.region
  service  = google_cloudfunctions2_function.http["scrape"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.tasks_invoker.email}"
}

resource "google_cloud_run_service_iam_member" "tasks_to_notify" {
  location = var.region
  service  = google_cloudfunctions2_function.http["notify"].name
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

resource "google_cloud_run_service_iam_member" "scheduler_to_map" {
  location = var.region
  service  = google_cloudfunctions2_function.http["map-http"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}
