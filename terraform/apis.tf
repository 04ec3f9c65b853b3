# Every API the deployment calls, enabled by Terraform on a fresh project. Resources that call an
# API directly depend on these (tests/unit/test_deploy_config.py checks it); disabling on destroy
# is off because other things in the project may use the same APIs.
locals {
  apis = [
    "cloudresourcemanager.googleapis.com", # project IAM bindings, the project data source
    "serviceusage.googleapis.com",         # enabling the rest, service identities
    "iam.googleapis.com",                  # service accounts, the deployer role
    "iamcredentials.googleapis.com",       # OIDC tokens minted for push, tasks and scheduler
    "cloudfunctions.googleapis.com",
    "run.googleapis.com",              # 2nd-gen functions are Cloud Run services (invoker IAM)
    "cloudbuild.googleapis.com",       # functions are built by Cloud Build; our pipeline too
    "artifactregistry.googleapis.com", # where the function builds keep their images
    "compute.googleapis.com",          # 2nd-gen function deploys check the project's default compute identity
    "pubsub.googleapis.com",
    "cloudtasks.googleapis.com",
    "cloudscheduler.googleapis.com",
    "sqladmin.googleapis.com", # the instance, and the connector's certificates
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
    "logging.googleapis.com",    # log-based metrics
    "monitoring.googleapis.com", # alert policies
  ]
}

resource "google_project_service" "enabled" {
  for_each           = toset(local.apis)
  service            = each.value
  disable_on_destroy = false
}

# Service agents that are granted roles below must exist first; the Pub/Sub agent is created
# lazily by Google otherwise, and a grant to it before then fails on a fresh project.
resource "google_project_service_identity" "pubsub" {
  provider   = google-beta
  service    = "pubsub.googleapis.com"
  depends_on = [google_project_service.enabled]
}
