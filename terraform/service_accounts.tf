# One service account per function, plus the identities Pub/Sub push, Cloud Tasks and Cloud
# Scheduler present when they call a function (each is that function's only invoker).

locals {
  # Topics each function publishes to (its stage's output).
  publishes = {
    "map-http"       = ["crawl-requests"]
    "map"            = ["crawl-mapped"]
    "sample"         = []
    "scrape"         = ["pages-fetched"]
    "snapshot"       = ["snapshots-written"]
    "ingest"         = ["snapshots-written"] # landing feed articles versions their bodies
    "ingest-webhook" = ["articles-accepted"]
    "backoffice"     = [] # reads and steers; its change events leave through the stages' outbox flush
    "notify"         = [] # delivers webhooks; records attempts in the database only
  }
  # Bucket access: create-only writes need objects.create (never overwrite or delete), reads need get.
  writes_blobs = ["map", "sample", "scrape", "snapshot", "ingest"]
  reads_blobs  = ["map", "sample", "scrape", "snapshot", "ingest", "ingest-webhook", "backoffice"]
  # Deletes, and nothing else: a settled run's fetched bodies (stages/upkeep.py: whichever stage settles
  # the run), and retention and artefact expiry on the sweep (map-http). Never an overwrite: no update.
  deletes_blobs = ["map-http", "map", "sample", "scrape", "snapshot"]
  # Scrape batches that hit their soft deadline enqueue their remainder; sample enqueues the batches.
  enqueues_scrape = ["sample", "scrape"]
  # A scrape batch that gives its site's slot back deletes the delayed task of the batch it sends for.
  deletes_scrape_tasks = ["scrape"]
}

resource "google_service_account" "fn" {
  for_each     = local.all_functions
  account_id   = "gl-${each.key}"
  display_name = "Gleaner ${each.key} function"
  depends_on   = [google_project_service.enabled]
}

resource "google_service_account" "pubsub_push" {
  account_id   = "gl-pubsub-push"
  display_name = "Gleaner: identity of Pub/Sub push deliveries"
  depends_on   = [google_project_service.enabled]
}

resource "google_service_account" "tasks_invoker" {
  account_id   = "gl-tasks-invoker"
  display_name = "Gleaner: identity of scrape tasks (Cloud Tasks OIDC)"
  depends_on   = [google_project_service.enabled]
}

resource "google_service_account" "scheduler" {
  account_id   = "gl-scheduler"
  display_name = "Gleaner: identity of Cloud Scheduler jobs (OIDC to map-http)"
  depends_on   = [google_project_service.enabled]
}

resource "google_pubsub_topic_iam_member" "publish" {
  for_each = { for pair in flatten([for fn, topics in local.publishes : [for t in topics : { fn = fn, topic = t }]]) : "${pair.fn}/${pair.topic}" => pair }
  topic    = google_pubsub_topic.topic[each.value.topic].id
  role     = "roles/pubsub.publisher"
  member   = "serviceAccount:${google_service_account.fn[each.value.fn].email}"
}

resource "google_storage_bucket_iam_member" "create_blobs" {
  for_each = toset(local.writes_blobs)
  bucket   = google_storage_bucket.blobs.name
  role     = "roles/storage.objectCreator"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# Fetched HTML is not kept past its run, and old versions are pruned (docs/provenance.md): the stages
# that settle runs and the sweep may delete objects, through a role that grants only that.
resource "google_project_iam_custom_role" "blob_remover" {
  role_id     = "gleanerBlobRemover"
  title       = "Gleaner blob remover"
  description = "Delete objects (settled runs' bodies, pruned versions); no overwrite."
  permissions = ["storage.objects.delete"]
  depends_on  = [google_project_service.enabled]
}

resource "google_storage_bucket_iam_member" "delete_blobs" {
  for_each = toset(local.deletes_blobs)
  bucket   = google_storage_bucket.blobs.name
  role     = google_project_iam_custom_role.blob_remover.id
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

resource "google_storage_bucket_iam_member" "read_blobs" {
  for_each = toset(local.reads_blobs)
  bucket   = google_storage_bucket.blobs.name
  role     = "roles/storage.objectViewer"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# Cloud SQL: connect through the connector and log in as the function's IAM database user.
resource "google_project_iam_member" "sql_client" {
  for_each = toset(local.db_functions)
  project  = var.project_id
  role     = "roles/cloudsql.client"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

resource "google_project_iam_member" "sql_instance_user" {
  for_each = toset(local.db_functions)
  project  = var.project_id
  role     = "roles/cloudsql.instanceUser"
  member   = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# Functions that create scrape tasks attach the tasks identity to them (OIDC token "act as").
resource "google_service_account_iam_member" "acts_as_tasks_invoker" {
  for_each           = toset(local.enqueues_scrape)
  service_account_id = google_service_account.tasks_invoker.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.fn[each.key].email}"
}
