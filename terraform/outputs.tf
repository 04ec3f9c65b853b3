output "crawl_request_url" {
  description = "map-http: POST a crawl request, GET ?run_id= for its status (an identity token of an operator, or the bearer behind one)."
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

output "builder_service_account" {
  description = "The build's identity (deployer role, schema migrator): pass it to gcloud builds submit --service-account."
  value       = google_service_account.builder.id
}

# The database roles (docs/deployment.md, step 5; docs/security.md): one script, in the order it runs.
# tests/integration/test_deploy_rehearsal.py renders this template and runs it on a PostgreSQL laid
# out like Cloud SQL's, then migrates and crawls as the build and a function would.
output "db_bootstrap_sql" {
  description = "Run once as the postgres user after the first apply: the schema owner (the migrator's role), the role every function acts as, and their members."
  value = templatefile("${path.module}/db_bootstrap.sql.tftpl", {
    database       = google_sql_database.gleaner.name
    owner_role     = var.database_owner_role
    app_role       = var.database_role
    migrator       = google_sql_user.migrator.name
    function_users = [for name in local.db_functions : google_sql_user.fn[name].name]
  })
}
