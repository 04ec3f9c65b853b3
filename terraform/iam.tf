# Who deploys: a custom role with only the permissions this Terraform and the build need, held by
# the build's own service account (gl-builder). The first apply is run once by a project owner
# (docs/deployment.md, "Zero to a crawl"); every later deploy runs as gl-builder.
#
# gl-builder is also the *migrator*: the build's migrate step logs in to Cloud SQL as its IAM
# database user, which is a member of the schema-owning role; the functions' users are members of
# a DML-only role and never run DDL (GLEANER_AUTO_MIGRATE=false).

locals {
  deployer_permissions = [
    # enable APIs, create service agents, read the project
    "serviceusage.services.enable", "serviceusage.services.get", "serviceusage.services.list",
    "serviceusage.services.use", "resourcemanager.projects.get",
    # project-level grants (cloudsql.client/instanceUser, the builder's own role)
    "resourcemanager.projects.getIamPolicy", "resourcemanager.projects.setIamPolicy",
    # service accounts, acting as them when deploying functions, and this role itself
    "iam.serviceAccounts.create", "iam.serviceAccounts.get", "iam.serviceAccounts.list",
    "iam.serviceAccounts.update", "iam.serviceAccounts.delete", "iam.serviceAccounts.actAs",
    "iam.serviceAccounts.getIamPolicy", "iam.serviceAccounts.setIamPolicy",
    "iam.roles.create", "iam.roles.get", "iam.roles.list", "iam.roles.update", "iam.roles.delete",
    # functions (2nd gen) and the Cloud Run services behind them, incl. invoker bindings
    "cloudfunctions.functions.create", "cloudfunctions.functions.get", "cloudfunctions.functions.list",
    "cloudfunctions.functions.update", "cloudfunctions.functions.delete",
    "cloudfunctions.functions.getIamPolicy", "cloudfunctions.functions.setIamPolicy",
    "cloudfunctions.operations.get", "cloudfunctions.operations.list",
    "run.services.get", "run.services.list", "run.services.getIamPolicy", "run.services.setIamPolicy",
    "run.operations.get",
    # the render service is a Cloud Run service of ours (render.tf), not one behind a function
    "run.services.create", "run.services.update", "run.services.delete",
    "artifactregistry.repositories.get", "artifactregistry.repositories.list",
    "artifactregistry.repositories.create", "artifactregistry.repositories.update",
    "artifactregistry.repositories.delete", "artifactregistry.repositories.getIamPolicy",
    "artifactregistry.repositories.setIamPolicy",
    "cloudbuild.builds.create", "cloudbuild.builds.get", "cloudbuild.builds.list",
    # buckets (blobs, build archives, state) and their objects
    "storage.buckets.create", "storage.buckets.get", "storage.buckets.list", "storage.buckets.update",
    "storage.buckets.delete", "storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy",
    "storage.objects.create", "storage.objects.get", "storage.objects.list", "storage.objects.delete",
    # topics, subscriptions and their IAM (the editor role cannot set these policies)
    "pubsub.topics.create", "pubsub.topics.get", "pubsub.topics.list", "pubsub.topics.update",
    "pubsub.topics.delete", "pubsub.topics.attachSubscription", "pubsub.topics.getIamPolicy",
    "pubsub.topics.setIamPolicy",
    "pubsub.subscriptions.create", "pubsub.subscriptions.get", "pubsub.subscriptions.list",
    "pubsub.subscriptions.update", "pubsub.subscriptions.delete", "pubsub.subscriptions.getIamPolicy",
    "pubsub.subscriptions.setIamPolicy",
    # queues and their IAM
    "cloudtasks.queues.create", "cloudtasks.queues.get", "cloudtasks.queues.list", "cloudtasks.queues.update",
    "cloudtasks.queues.delete", "cloudtasks.queues.getIamPolicy", "cloudtasks.queues.setIamPolicy",
    "cloudtasks.locations.get", "cloudtasks.locations.list",
    # scheduler jobs
    "cloudscheduler.jobs.create", "cloudscheduler.jobs.get", "cloudscheduler.jobs.list",
    "cloudscheduler.jobs.update", "cloudscheduler.jobs.delete", "cloudscheduler.jobs.enable",
    "cloudscheduler.jobs.pause", "cloudscheduler.locations.get", "cloudscheduler.locations.list",
    # the database instance, database and IAM users; connect + login for the migrate step
    "cloudsql.instances.create", "cloudsql.instances.get", "cloudsql.instances.list",
    "cloudsql.instances.update", "cloudsql.instances.delete", "cloudsql.instances.connect",
    "cloudsql.instances.login",
    "cloudsql.databases.create", "cloudsql.databases.get", "cloudsql.databases.list",
    "cloudsql.databases.update", "cloudsql.databases.delete",
    "cloudsql.users.create", "cloudsql.users.list", "cloudsql.users.update", "cloudsql.users.delete",
    # the bearer secret's metadata and accessors (never its value)
    "secretmanager.secrets.get", "secretmanager.secrets.getIamPolicy", "secretmanager.secrets.setIamPolicy",
    # log-based metrics and alert policies
    "logging.logMetrics.create", "logging.logMetrics.get", "logging.logMetrics.list",
    "logging.logMetrics.update", "logging.logMetrics.delete",
    "monitoring.alertPolicies.create", "monitoring.alertPolicies.get", "monitoring.alertPolicies.list",
    "monitoring.alertPolicies.update", "monitoring.alertPolicies.delete",
    "monitoring.notificationChannels.get", "monitoring.notificationChannels.list",
    # the build writes its logs
    "logging.logEntries.create",
  ]
}

resource "google_project_iam_custom_role" "deployer" {
  role_id     = "gleanerDeployer"
  title       = "Gleaner deployer"
  description = "What terraform/ and cloudbuild.yaml need to deploy Gleaner, and nothing more."
  permissions = local.deployer_permissions
  depends_on  = [google_project_service.enabled]
}

# The build's identity: runs tests, packages, applies Terraform and migrates the schema.
resource "google_service_account" "builder" {
  account_id   = "gl-builder"
  display_name = "Gleaner: Cloud Build deployer and schema migrator"
  depends_on   = [google_project_service.enabled]
}

resource "google_project_iam_member" "builder_deploys" {
  project = var.project_id
  role    = google_project_iam_custom_role.deployer.id
  member  = "serviceAccount:${google_service_account.builder.email}"
}

# The migrate step's database login (IAM database authentication, no password).
resource "google_sql_user" "migrator" {
  name     = trimsuffix(google_service_account.builder.email, ".gserviceaccount.com")
  instance = google_sql_database_instance.main.name
  type     = "CLOUD_IAM_SERVICE_ACCOUNT"
}

# People (or groups) who may call map-http from the console's test tab, `gcloud functions call`
# or `gleaner submit`: Cloud Run checks their identity token before the code sees the request.
resource "google_cloud_run_service_iam_member" "operators" {
  for_each = toset(var.operators)
  location = var.region
  service  = google_cloudfunctions2_function.http["map-http"].name
  role     = "roles/run.invoker"
  member   = each.value
}

# Whoever runs the feed poller (a service account that sends an identity token in
# X-Serverless-Authorization and the bearer in Authorization).
resource "google_cloud_run_service_iam_member" "feed_pollers" {
  for_each = toset(var.feed_pollers)
  location = var.region
  service  = google_cloudfunctions2_function.http["ingest-webhook"].name
  role     = "roles/run.invoker"
  member   = each.value
}
