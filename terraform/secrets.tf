# The bearer token of the HTTP triggers. Created once by an operator, outside Terraform, so the
# value never passes through a build or a tfvars file:
#   printf %s "$TOKEN" | gcloud secrets create gleaner-webhook-secret --data-file=-
data "google_secret_manager_secret" "webhook" {
  secret_id = var.webhook_secret_id
}

# Cloud Scheduler sends the bearer in its request headers, so it reads the current version
# (the value is therefore in the Terraform state: keep the state bucket private).
data "google_secret_manager_secret_version" "webhook" {
  secret = data.google_secret_manager_secret.webhook.id
}

resource "google_secret_manager_secret_iam_member" "webhook" {
  for_each  = toset(local.secret_functions)
  secret_id = data.google_secret_manager_secret.webhook.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.fn[each.key].email}"
}
