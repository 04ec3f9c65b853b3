output "crawl_request_url" {
  description = "POST a crawl request here (Authorization: Bearer <webhook secret>)."
  value       = google_cloudfunctions2_function.http["map-http"].service_config[0].uri
}

output "feed_webhook_url" {
  description = "The feed-poller webhook."
  value       = google_cloudfunctions2_function.http["ingest-webhook"].service_config[0].uri
}

output "function_urls" {
  description = "Every function's URL."
  value = merge(
    { for k, f in google_cloudfunctions2_function.http : k => f.service_config[0].uri },
    { for k, f in google_cloudfunctions2_function.event : k => f.service_config[0].uri },
  )
}

output "blob_url" {
  value = "gs://${google_storage_bucket.blobs.name}"
}

output "cloudsql_instance" {
  value = google_sql_database_instance.main.connection_name
}

output "scrape_queue" {
  value = google_cloud_tasks_queue.scrape.id
}

output "dead_letter_subscription" {
  description = "Pull from here to inspect or replay messages that exhausted their attempts."
  value       = google_pubsub_subscription.dead_letter_hold.id
}

output "db_bootstrap_sql" {
  description = "Run once as the postgres user after the first apply: the role every function acts as (GLEANER_DATABASE_ROLE)."
  value = join("\n", concat(
    ["CREATE ROLE ${var.database_role} NOLOGIN;",
    "GRANT CREATE, CONNECT ON DATABASE ${google_sql_database.gleaner.name} TO ${var.database_role};"],
    [for u in google_sql_user.fn : "GRANT ${var.database_role} TO \"${u.name}\";"],
  ))
}
