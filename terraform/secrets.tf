# The bearer token for callers that are not Google identities (the feed poller's Authorization;
# `gleaner submit --token`). Created once by an operator, outside Terraform, so the value never
# passes through a build, a tfvars file or the Terraform state (only its name is read here):
#   openssl rand -hex 32 | tr -d '\n' | gcloud secrets create gleaner-webhook-secret --data-file=-
data "google_secret_manager_secret" "webhook" {
  secret_id  = var.webhook_secret_id
  depends_on = [google_project_service.enabled]
}

resource "google_secret_manager_secret_iam_member" "webhook" {
  for_each  = toset(local.secret_functions)
  secret_id = data.google_secret_manager_secret.webhook.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.fn[each.key].email}"
}

# The key behind erased-content digests (GLEANER_ERASURE_KEY, 32 random bytes as hex): every
# function must derive the same digests, so it is one secret, created once like the bearer:
#   openssl rand -hex 32 | tr -d '\n' | gcloud secrets create gleaner-erasure-key --data-file=-
data "google_secret_manager_secret" "erasure_key" {
  secret_id  = var.erasure_key_secret_id
  depends_on = [google_project_service.enabled]
}

resource "google_secret_manager_secret_iam_member" "erasure_key" {
  for_each  = toset(local.db_functions)
  secret_id = data.google_secret_manager_secret.erasure_key.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.fn[each.key].email}"
}
